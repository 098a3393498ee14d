"""Deciding a tool approval request.

Every write is a service (docs/design.md §16: one module per action family)."""

from __future__ import annotations

from django.db import transaction

from sessions_app.core import limits
from sessions_app.core.ids import (
    validate_session_id,
)
from sessions_app.runtime.turn.approvals import approval_resolve
from sessions_app.store import (
    SessionNotFound,
    get_store,
)
from sessions_app.store import approvals as approval_rows


def approval_decide(*, session_id: str, owner_id: int, call_id: str, allow: bool) -> str:
    """Record the person's answer to a pending approval request; returns the new status.

    Steps: check the session is the caller's (else SessionNotFound, as for a missing one);
    switch the request from `pending` to `allowed` or `denied` in one conditional UPDATE, so
    of two answers from two tabs or workers exactly one counts (ApprovalNotFound for an
    unknown call, ApprovalClosed when the request was answered or ended already); after
    commit, wake the waiting turn if it runs in this process. A turn in another process reads
    the decision in its lease keeper's next poll. A call id with NUL or over
    CALL_ID_MAX_CHARS: InputInvalid.
    """
    validate_session_id(session_id)
    limits.text_check(
        call_id, name="the call id", max_chars=approval_rows.CALL_ID_MAX_CHARS, min_chars=1
    )
    meta = get_store().get_meta(session_id)
    if meta is None or meta.owner_id != owner_id:
        raise SessionNotFound(session_id)
    status = approval_rows.ALLOWED if allow else approval_rows.DENIED
    with transaction.atomic():
        approval_id = approval_rows.request_decide(
            session_id=session_id, call_id=call_id, status=status
        )
        transaction.on_commit(lambda: approval_resolve(approval_id, status))
    return status
