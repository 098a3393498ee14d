"""Tool approval requests: one `ToolApproval` row per call waiting for the person's answer.

Rows of the database under both backends: a request must be answerable from any socket in
any worker, and the database is what every worker shares (on the jsonl backend too). The
runtime's approval gate (runtime.turn.approvals) records and closes requests; the service
`approval_decide` answers them; a session's delete removes its rows (the store's `delete`).
Every change of status is a conditional UPDATE from `pending`, so of a decision, a timeout
and an abort that cross each other exactly one outcome is kept: the row's.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.utils import timezone

from jarvis_site.shared.errors import Code, DomainError
from sessions_app.models import ToolApproval
from sessions_app.store.rows import delete_rows_of_session
from sessions_app.store.workers import current_worker_id, dead_workers

PENDING = ToolApproval.PENDING
ALLOWED = ToolApproval.ALLOWED
DENIED = ToolApproval.DENIED
TIMED_OUT = ToolApproval.TIMED_OUT
ABORTED = ToolApproval.ABORTED
INTERRUPTED = ToolApproval.INTERRUPTED

CALL_ID_MAX_CHARS = ToolApproval._meta.get_field("call_id").max_length


class ApprovalNotFound(DomainError):
    """No approval request with this call id in this session (404 not_found)."""

    code = Code.NOT_FOUND


class ApprovalClosed(DomainError):
    """The request was already answered, or ended without an answer (409 approval_closed)."""

    code = Code.APPROVAL_CLOSED


@dataclass(frozen=True)
class ApprovalRequest:
    turn_id: str
    call_id: str
    tool: str
    arguments: dict[str, Any]
    created_at: datetime


def request_insert(
    *, session_id: str, turn_id: str, call_id: str, tool: str, arguments: dict
) -> int:
    """Store a pending request of this process; returns its id. The caller fences it to the
    turn's incarnation (store.fenced), so a session deleted since never gets it."""
    # A model may use a call id again in a later turn; the earlier request has ended.
    ToolApproval.objects.filter(session_id=session_id, call_id=call_id).exclude(
        status=PENDING
    ).delete()
    return ToolApproval.objects.create(
        session_id=session_id,
        turn_id=turn_id,
        call_id=call_id,
        tool=tool,
        arguments=arguments,
        worker_id=current_worker_id(),
        created_at=timezone.now(),
    ).id


def request_close(*, approval_id: int, status: str) -> str:
    """End a request that is still pending with `status`; returns the row's status after,
    which is the decision when one came in first."""
    ToolApproval.objects.filter(id=approval_id, status=PENDING).update(
        status=status, decided_at=timezone.now()
    )
    current = ToolApproval.objects.filter(id=approval_id).values_list("status", flat=True)
    return current.first() or status


def request_decide(*, session_id: str, call_id: str, status: str) -> int:
    """Switch a pending request to `status` (allowed or denied); returns its id.

    Raises ApprovalNotFound for an unknown call, ApprovalClosed when the request was answered
    or ended already. Call inside a transaction: the id is read after the update.
    """
    rows = ToolApproval.objects.filter(session_id=session_id, call_id=call_id)
    if not rows.filter(status=PENDING).update(status=status, decided_at=timezone.now()):
        if rows.exists():
            raise ApprovalClosed("this request was already answered or has ended")
        raise ApprovalNotFound(f"no approval request for call {call_id!r} in this session")
    return rows.values_list("id", flat=True).get()


def decisions(approval_ids: list[int]) -> list[tuple[int, str]]:
    """(id, status) of the requests among these that were allowed or denied."""
    decided = ToolApproval.objects.filter(id__in=approval_ids, status__in=[ALLOWED, DENIED])
    return list(decided.values_list("id", "status"))


def requests_interrupt(*, session_id: str) -> list[str]:
    """Close the session's pending requests as interrupted; returns their call ids."""
    pending = ToolApproval.objects.filter(session_id=session_id, status=PENDING)
    call_ids = list(pending.values_list("call_id", flat=True))
    if call_ids:
        pending.update(status=INTERRUPTED, decided_at=timezone.now())
    return call_ids


def requests_pending(*, session_id: str) -> list[ApprovalRequest]:
    """The session's pending requests, oldest first.

    A request whose worker is known to be dead is left out: nobody would act on the answer
    (the repair closes it on the session's next use).
    """
    rows = (
        ToolApproval.objects.filter(session_id=session_id, status=PENDING)
        .exclude(worker_id__in=dead_workers())
        .order_by("created_at", "id")
        .values_list("turn_id", "call_id", "tool", "arguments", "created_at")
    )
    return [ApprovalRequest(*row) for row in rows]


def remove_for_session(session_id: str) -> None:
    """Remove every request of a session that is being deleted (store backends' `delete`)."""
    delete_rows_of_session(ToolApproval, session_id)
