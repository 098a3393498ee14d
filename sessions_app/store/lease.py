"""The backend half of a turn lease (docs/design.md §5.5): where a turn's holding is recorded.

`runtime.turn.lease` runs the lease (waiting, the keeper thread that renews leases and watches
for aborts, SessionBusy); it gets the object that knows the backend from the store
(`store.turn_lease(session_id)`), so that it never needs to know which backend is in use.
Each backend has its own kind: `db_lease.DbTurnLease` (fields of the session row) and
`file_lease.FileTurnLease` (an flock beside the session's files).
"""

from __future__ import annotations

from abc import ABC, abstractmethod

from sessions_app.core.ids import unique_token
from sessions_app.store.workers import current_worker_id


def new_holder() -> str:
    # `<worker id>:<token>`: the worker id (host:pid:boot) lets a waiter see that the holder's
    # process is gone — on this machine by its pid, anywhere by its silent heartbeat.
    return f"{current_worker_id()}:{unique_token()}"


class TurnLeaseBackend(ABC):
    """One turn's hold on a session, as its backend records it; used by one turn at a time."""

    def __init__(self, session_id: str, owner_id: int | None = None):
        self.session_id = session_id
        # With an owner, the lease of that person's session only: someone else's session is
        # SessionNotFound, and its lease is never taken, not even for a moment.
        self.owner_id = owner_id
        self.holder = new_holder()
        # The session as the statement that took the lease found it, when the backend's
        # taking can say (the turn then need not read it again under the lease); else None.
        self.meta_when_taken = None

    @abstractmethod
    def try_acquire(self) -> bool:
        """Take the lease if it is free (or its holder is gone); never blocks.

        Raises SessionNotFound when the session does not exist, or is not `owner_id`'s.
        """

    @classmethod
    @abstractmethod
    def keep(cls, leases: list[TurnLeaseBackend]) -> list[TurnLeaseBackend]:
        """Keep these held leases (all of this kind) alive, in as few queries as the kind
        can; return those whose turn must stop: an abort was asked for, or the lease was
        lost to another holder."""

    @abstractmethod
    def release(self) -> None:
        """Give the lease up (only if it is still ours)."""

    def renew(self) -> bool:
        """Renew the lease now if it is still ours (an abort asked for leaves it ours); False
        when another holder has it. After a database outage a turn asks this before it
        writes again (docs/design.md §32). A lease that lasts as long as its process holds
        it (an flock) is always still ours."""
        return True
