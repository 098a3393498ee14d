"""Share links: make, list, revoke, refresh, and a reader's own copy (docs/design.md §24).

Every write is a service (docs/design.md §16: one module per action family)."""

from __future__ import annotations

import secrets
from datetime import timedelta

from django.db import transaction
from django.utils import timezone

from sessions_app import selectors
from sessions_app.models import ShareLink
from sessions_app.selectors.shares import (
    ShareNotFound,
    share_resolve,
    shared_entries,
    token_hash,
)
from sessions_app.services.sessions import session_create
from sessions_app.store import NewEntry, SessionMeta, SessionNotFound, get_store
from sessions_app.store import share_links as rows

SHARE_EXPIRY_DAYS_MAX = 365


def share_create(
    *, session_id: str, owner_id: int, expires_in_days: int | None, include_tools: bool
) -> tuple[ShareLink, str]:
    """A link to the caller's session as it is now (up to its last seq); returns the link
    and its token, which exists nowhere else afterwards (only its hash is kept)."""
    meta = selectors.session_get(session_id=session_id, owner_id=owner_id)
    token = secrets.token_urlsafe(32)
    expires_at = (
        timezone.now() + timedelta(days=expires_in_days) if expires_in_days is not None else None
    )
    share = rows.share_add(
        owner_id=owner_id,
        session_id=session_id,
        incarnation=meta.incarnation,
        token_hash=token_hash(token),
        upto_seq=meta.last_seq,
        include_tools=include_tools,
        expires_at=expires_at,
    )
    return share, token


def shares_list(*, session_id: str, owner_id: int) -> list[ShareLink]:
    selectors.session_get(session_id=session_id, owner_id=owner_id)
    return rows.shares_of(session_id=session_id, owner_id=owner_id)


def _owned_share(*, session_id: str, owner_id: int, share_id: int) -> ShareLink:
    selectors.session_get(session_id=session_id, owner_id=owner_id)
    share = rows.share_of(share_id=share_id, session_id=session_id, owner_id=owner_id)
    if share is None:
        raise ShareNotFound()
    return share


def share_revoke(*, session_id: str, owner_id: int, share_id: int) -> None:
    """Revoke a link: its row goes, so its token answers 404 like one never made."""
    rows.share_remove(_owned_share(session_id=session_id, owner_id=owner_id, share_id=share_id))


def share_refresh(*, session_id: str, owner_id: int, share_id: int) -> ShareLink:
    """Show the conversation up to now under the same URL."""
    share = _owned_share(session_id=session_id, owner_id=owner_id, share_id=share_id)
    meta = selectors.session_get(session_id=session_id, owner_id=owner_id)
    if meta.incarnation != share.session_incarnation:
        raise ShareNotFound()  # a link of a session that was deleted and made again
    return rows.share_move(share, upto_seq=meta.last_seq)


def shared_copy(*, token: str, owner_id: int) -> SessionMeta:
    """A new session of the caller holding what the share shows, to continue from there.

    Steps: resolve the link (ShareNotFound for unknown, revoked, expired); read what it
    shows; in one transaction create the caller's session (titled as the shared one) and
    append the shown messages to it. The copy has no parent: it is the reader's own, and
    says nothing of where the owner's session lives.
    """
    share, meta = share_resolve(token)
    shown = shared_entries(share)
    store = get_store()
    with transaction.atomic():
        copy, _ = session_create(owner_id=owner_id, agent=meta.agent, title=meta.title)
        if shown:
            store.append(
                copy.id,
                [
                    NewEntry(
                        role=entry.role,
                        content=entry.content,
                        tool_calls=entry.tool_calls if share.include_tools else None,
                        tool_call_id=entry.tool_call_id if share.include_tools else "",
                        name=entry.name if share.include_tools else "",
                        is_error=entry.is_error,
                    )
                    for entry in shown
                ],
                incarnation=copy.incarnation,
            )
    found = store.get_meta(copy.id)
    if found is None:
        raise SessionNotFound(copy.id)
    return found


def shares_remove_for_session(*, session_id: str) -> None:
    """A deleted session's links go with it (receiver of `session_deleted`)."""
    rows.remove_for_session(session_id)
