"""A person's sessions list, live in every tab (docs/design.md §24): `session_changed` frames.

Every change to a session that its row in the list shows — created, branched, renamed,
pinned, archived, deleted, a new answer — is sent, once committed, to the channel-layer group
of its owner, which every `/ws/me/` socket of that person joins. With REDIS_URL the layer is
Redis, so a change made on one worker reaches the tabs on every worker; a rolled-back change
reaches nobody. Changes are rare next to a turn's events (one per request, not per token),
so one group send each is all they need.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction

from sessions_app import selectors
from sessions_app.runtime.loop import server_loop
from sessions_app.store import SessionMeta, get_store

CREATED, UPDATED, DELETED = "created", "updated", "deleted"


def person_group(owner_id: int) -> str:
    """The channel-layer group of one person's `/ws/me/` sockets."""
    return f"person.{int(owner_id)}"


def _send(owner_id: int, frame: dict[str, Any]) -> None:
    server_loop.group_send_soon(person_group(owner_id), {"type": "person.event", "event": frame})


def session_changed_on_commit(*, meta: SessionMeta, action: str) -> None:
    """Tell the owner's tabs that `meta` was created or updated, after the commit."""
    if meta.owner_id is None or meta.spawned_by is not None:
        return  # system sessions and sub-agents' sessions are in nobody's list
    frame = {"type": "session_changed", "action": action, "session": selectors.session_to_api(meta)}
    owner_id = meta.owner_id
    transaction.on_commit(lambda: _send(owner_id, frame))


def session_updated_on_commit(*, session_id: str) -> None:
    """The session as it is now, as an `updated` frame after the commit (a new answer)."""
    meta = get_store().get_meta(session_id)
    if meta is not None:
        session_changed_on_commit(meta=meta, action=UPDATED)


def session_deleted_on_commit(*, session_id: str, owner_id: int | None) -> None:
    """A `deleted` frame carries the id only: the session is gone."""
    if owner_id is None:
        return
    frame = {"type": "session_changed", "action": DELETED, "session": {"id": session_id}}
    transaction.on_commit(lambda: _send(owner_id, frame))
