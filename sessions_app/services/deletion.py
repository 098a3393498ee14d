"""Deleting sessions: one, a parent's sub-agent sessions, every session of a user.

Every write is a service (docs/design.md §16: one module per action family)."""

from __future__ import annotations

import logging

from django.conf import settings
from django.db import transaction

from jarvis_site.shared.errors import Code, DomainError
from sessions_app.core.ids import (
    validate_session_id,
)
from sessions_app.core.signals import session_deleted
from sessions_app.runtime.turn import turns
from sessions_app.runtime.turn.agents import per_parent_session_ids
from sessions_app.runtime.turn.lease import SessionBusy, TurnLease, lease_acquire
from sessions_app.runtime.turn.queue import queue_clear
from sessions_app.services.sessions import SIGNAL_SENDER, session_locked
from sessions_app.store import (
    SessionMeta,
    SessionNotFound,
    connections,
    get_store,
)
from sessions_app.store.blobs import blob_links_remove

logger = logging.getLogger(__name__)


class SessionConnected(DomainError):
    """Delete refused: a WebSocket is attached to the session (409 session_connected)."""

    code = Code.SESSION_CONNECTED


def _turn_stopped(session_id: str) -> TurnLease | None:
    """Abort the session's running turn (in any process), wait for it to end, and hold the
    turn lease so that no other turn starts; None when the session is gone meanwhile.

    Raises SessionBusy when the turn does not end within BUSY_GRACE_SEC.
    """
    turns.turn_abort(session_id=session_id)
    try:
        return lease_acquire(session_id=session_id, wait_sec=settings.BUSY_GRACE_SEC)
    except SessionNotFound:
        return None


def session_delete(*, session_id: str, owner_id: int) -> bool:
    """Delete the caller's session with its entries, notices and memory; False if missing.

    Another user's session answers exactly like a missing one (False), so a delete tells
    nobody which ids exist. Steps:
    1. refuse with SessionConnected while a live connection is registered;
    2. stop the running turn, if any, and hold the turn lease: nothing of that turn can be
       written after the delete (SessionBusy when it does not end in time);
    3. in one transaction holding the session's lock (a concurrent `connection_open` waits
       here, then opens a new session), check the owner and the connections again, send
       `session_deleted` (memory_app purges — before anything goes, so a failing receiver
       rolls everything back), then remove the session and all it has in the store
       (`store.delete`: rows or files, its connection rows and approval requests).
    4. after the commit, its per_parent_session sub-agent sessions
       (`session_delete_subagents`).
    Its export files stay: they are the person's copy ("export before you delete",
    docs/design.md §31), kept until the account goes or EXPORT_RETENTION_DAYS pass.
    A jsonl session's files are removed inside the transaction, while the lock is held:
    removing them after commit would let a reconnect recreate the session first and then
    lose its files.
    """
    validate_session_id(session_id)
    store = get_store()
    meta = store.get_meta(session_id)
    if meta is None or meta.owner_id != owner_id:
        return False
    if connections.any_live(session_id):
        raise SessionConnected("the session is open in a browser tab or another client")
    lease = _turn_stopped(session_id)
    if lease is None:
        return False
    try:
        with session_locked(session_id, agent=meta.agent, owner_id=owner_id) as locked:
            if locked:
                meta = store.get_meta(session_id)  # re-read under the lock
            if meta is None or meta.owner_id != owner_id:
                return False
            if connections.any_live(session_id):
                raise SessionConnected("the session is open in a browser tab or another client")
            _session_remove(store, session_id=session_id, owner_id=owner_id)
    finally:
        lease.release()
    logger.info("session %s deleted by user %s", session_id, owner_id)
    session_delete_subagents(parent_id=session_id, owner_id=owner_id)
    return True


def session_delete_subagents(*, parent_id: str, owner_id: int | None) -> list[str]:
    """Delete the per_parent_session sub-agent sessions of a deleted session; their ids.

    Each goes through `session_delete` (memory purged, its own checks), after the parent's
    delete has committed: a sub-agent session that cannot go now (open in a tab, busy) stays
    and is removed later by `/cleanup agents`, since its parent is gone. Sub-agents of other
    policies are not the parent's: per_task sessions are deleted by their call, per_agent
    ones outlive every conversation.
    """
    store = get_store()
    removed = []
    for agent, session_id in per_parent_session_ids(parent_id=parent_id, owner_id=owner_id):
        meta = store.get_meta(session_id)
        if meta is None or meta.spawned_by != parent_id or meta.agent != agent:
            continue
        try:
            if session_delete(session_id=session_id, owner_id=owner_id):
                removed.append(session_id)
        except Exception:  # noqa: BLE001 - the parent is gone either way; cleanup finishes
            logger.exception("sub-agent session %s of %s was not deleted", session_id, parent_id)
    return removed


def _session_remove(store, *, session_id: str, owner_id: int | None) -> None:
    """Step 3 of a delete after the checks; the caller holds the transaction and the lock."""
    session_deleted.send(sender=SIGNAL_SENDER, session_id=session_id, owner_id=owner_id)
    queue_clear(session_id=session_id)
    blob_links_remove(session_id=session_id)
    store.delete(session_id)


def sessions_delete_for_owner(*, owner_id: int) -> int:
    """Delete every session of a user whose account is being deleted; returns how many.

    The database would cascade the user's session rows by itself, but that skips the
    memory purge (`session_deleted`) and never reaches jsonl files. Open connections do not
    block this: the account they belong to is going away. Every purge runs before any
    session is erased, so a purge that fails leaves every jsonl file in place.
    """
    store = get_store()
    doomed = store.list(owner_id=owner_id)
    leases = []
    for meta in doomed:
        try:
            lease = _turn_stopped(meta.id)
        except SessionBusy:
            # The account goes regardless; the turn's own writes are refused once its
            # session is gone (they are fenced to the session's incarnation).
            lease = None
        if lease is not None:
            leases.append(lease)
    try:
        with transaction.atomic():
            _owner_sessions_remove(store, owner_id=owner_id, doomed=doomed)
    finally:
        for lease in leases:
            lease.release()
    removed = len(doomed)
    logger.info("%d sessions of deleted user %s removed", removed, owner_id)
    return removed


def _owner_sessions_remove(store, *, owner_id: int, doomed: list[SessionMeta]) -> None:
    # Every purge runs before any session is erased: a purge that fails leaves every jsonl
    # file in place (the caller's transaction rolls the rows back). Each lock is held until
    # the caller's transaction ends.
    for meta in doomed:
        with store.locked(meta.id, agent=meta.agent, owner_id=owner_id):
            session_deleted.send(sender=SIGNAL_SENDER, session_id=meta.id, owner_id=owner_id)
    for meta in doomed:
        queue_clear(session_id=meta.id)
        blob_links_remove(session_id=meta.id)
        store.delete(meta.id)
