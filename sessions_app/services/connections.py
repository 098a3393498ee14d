"""Live WebSocket connections: open, heartbeat, close.

Every write is a service (docs/design.md §16: one module per action family)."""

from __future__ import annotations

from django.conf import settings
from django.db import transaction

from sessions_app.core.ids import (
    is_reserved,
    reserved_refuse,
    validate_session_id,
)
from sessions_app.core.signals import session_ended
from sessions_app.runtime.turn.agents import agent_known
from sessions_app.services.session_events import CREATED, session_changed_on_commit
from sessions_app.services.sessions import SIGNAL_SENDER, session_locked
from sessions_app.store import (
    SessionMeta,
    SessionNotFound,
    connections,
    get_store,
)
from sessions_app.store.workers import heartbeat_start

# A consumer renews its connection row every HEARTBEAT_SEC, well within the registry's
# LIVE_TIMEOUT_SEC (sessions_app.store.connections) after which a row no longer counts.
HEARTBEAT_SEC = 10


def connection_open(
    *, session_id: str, channel_name: str, user_id: int, agent: str = "jarvis"
) -> tuple[SessionMeta, bool]:
    """Register a WebSocket on a session, creating the session if it does not exist.

    Steps, in one transaction holding the session's lock: read or create the session, check
    the owner, register the connection. A delete running at the same time either sees this
    connection (409) or finishes first, and then this opens a new, empty session. Returns
    (meta, created). Raises SessionNotFound for another user's session, ReservedSessionId
    for a sub-agent's id that is not the caller's session, UnknownAgent when a new session
    would get an agent that is not defined.
    """
    validate_session_id(session_id)
    if settings.WORKER_HEARTBEAT:
        heartbeat_start()  # this worker's sockets count only while it is heard from
    store = get_store()
    with session_locked(session_id, agent=agent, owner_id=user_id):
        meta = store.get_meta(session_id)
        if is_reserved(session_id) and (meta is None or meta.owner_id != user_id):
            # A user opens their sub-agent sessions, never makes one.
            raise reserved_refuse(session_id)
        created = meta is None
        if created:
            agent_known(agent)
            meta = store.create(session_id, agent=agent, owner_id=user_id)
        if meta.owner_id != user_id:
            raise SessionNotFound(session_id)
        connections.register(session_id=session_id, channel_name=channel_name, user_id=user_id)
        if created:
            session_changed_on_commit(meta=meta, action=CREATED)
    return meta, created


def live_connection_count(*, session_id: str) -> int:
    """Connections attached to a session now (rows of dead workers do not count)."""
    return connections.live_count(session_id)


def connection_heartbeat(*, channel_name: str) -> bool:
    """Renew a connection's row; False when it is gone (swept, or its session was deleted)."""
    return connections.renew(channel_name=channel_name)


def connection_close(*, channel_name: str) -> bool:
    """Unregister a connection; when it was the session's last live one, send `session_ended`.

    Returns whether the session ended. The registry locks the session while it removes the
    row, so that two tabs closing at once cannot both see the other still open.
    """
    with transaction.atomic():
        closed = connections.unregister(channel_name=channel_name)
        if closed is None or not closed.last:
            return False
        transaction.on_commit(
            lambda: session_ended.send(
                sender=SIGNAL_SENDER, session_id=closed.session_id, owner_id=closed.user_id
            )
        )
    return True
