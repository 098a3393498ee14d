"""Naming and ordering the sessions list: rename, pin, archive (docs/design.md §24).

Every write is a service (docs/design.md §16: one module per action family)."""

from __future__ import annotations

from django.db import transaction

from sessions_app import selectors
from sessions_app.services.session_events import UPDATED, session_changed_on_commit
from sessions_app.store import SessionMeta, get_store


def session_organize(
    *,
    session_id: str,
    owner_id: int,
    title: str | None = None,
    pinned: bool | None = None,
    archived: bool | None = None,
) -> SessionMeta:
    """Rename, pin/unpin, archive/unarchive the caller's session (None: leave as it is).

    No turn lease: none of these is part of the conversation, so a running turn neither
    waits for them nor is waited for. Every tab of the person hears of the change after the
    commit. Raises SessionNotFound (missing or not theirs).
    """
    selectors.session_get(session_id=session_id, owner_id=owner_id)
    store = get_store()
    with transaction.atomic():
        if title is not None:
            store.set_title(session_id, title)
        meta = store.set_flags(session_id, pinned=pinned, archived=archived)
        session_changed_on_commit(meta=meta, action=UPDATED)
    return meta
