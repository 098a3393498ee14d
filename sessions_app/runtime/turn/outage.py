"""A turn's writes through a database outage (docs/design.md §32).

A write that meets an unreachable database (jarvis_site.shared.outages) is tried again every
RETRY_SEC while the turn keeps what it has — its answer, its steps, in memory — for up to
DB_OUTAGE_HOLD_SEC from the outage's first failed write. The write that succeeds ends the
outage for the turn, which goes on as if nothing happened: an answer that ended while the
database was away is stored whole. Past the hold the write raises `DatabaseAway`: the turn
ends `error` for every tab (its `agent_end` needs no database), and what it still holds is
written by `late_close` once the database is back.

The lease stays as strict as ever: after an outage, every write first checks, in the same pool
call, that the turn still holds its session's lease (the lease keeper renews it on its next
round, or finds it taken). A turn whose lease was taken meanwhile writes nothing more; the
turn that took it closed this one as a crash (`interrupted`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

from django.conf import settings

from jarvis_site.shared.errors import Code, DomainError
from jarvis_site.shared.outages import database_away
from sessions_app.runtime.loop.executors import in_sync_caller

T = TypeVar("T")
logger = logging.getLogger(__name__)

RETRY_SEC = 0.25
# A late closing gives up after this long; the session's next turn then closes the turn as a
# crash would (`interrupted`), with the answer it could not store.
LATE_CLOSE_GIVE_UP_SEC = 600.0


class DatabaseAway(DomainError):
    """The database stayed unreachable for DB_OUTAGE_HOLD_SEC under a running turn."""

    code = Code.DATABASE_UNAVAILABLE

    def __init__(self, waited_sec: float):
        super().__init__(
            f"the database could not be reached for {waited_sec:.0f} s; the answer so far is "
            "stored once it is back"
        )


class LeaseLost(DomainError):
    """The turn's lease was taken while the database was away: the turn writes nothing more."""

    code = Code.TURN_FAILED

    def __init__(self):
        super().__init__("the session was taken over while the database was away")


class WriteHold:
    """One per turn: since when its writes meet an outage, and whether its lease still holds.
    `still_ours()` (blocking, run in the write's pool call) renews the lease and says whether
    the turn still holds it."""

    def __init__(self, *, turn_id: str, still_ours: Callable[[], bool]):
        self.turn_id = turn_id
        self.still_ours = still_ours
        self.since: float | None = None  # the outage's first failed write, for this turn
        self.checked = True  # the lease was checked since the last outage

    def guarded(self, function: Callable[..., T]) -> Callable[..., T]:
        """`function` for the pool: after an outage, the lease's check first."""

        def call(*args, **kwargs) -> T:
            if not self.checked:
                if not self.still_ours():
                    raise LeaseLost()
                self.checked = True
            return function(*args, **kwargs)

        return call

    async def write(self, attempt: Callable[[], Awaitable[T]], *, expire: bool = True) -> T:
        """`attempt()` (a pool call made with `guarded`) until it meets no outage. With
        `expire`, DatabaseAway once the outage has lasted DB_OUTAGE_HOLD_SEC. A synchronous
        caller's turn (the HTTP API, a command) writes in the caller's own transaction: it
        meets the outage as its caller does, at once."""
        if in_sync_caller():
            return await attempt()
        while True:
            try:
                result = await attempt()
            except Exception as error:
                if not database_away(error):
                    raise
                self._failed(error, expire)
                await asyncio.sleep(RETRY_SEC)
                continue
            if self.since is not None:
                logger.warning(
                    "turn %s stored what it held: the database is back after %.1f s",
                    self.turn_id,
                    time.monotonic() - self.since,
                )
                self.since = None
            return result

    def _failed(self, error: Exception, expire: bool) -> None:
        now = time.monotonic()
        self.checked = False
        if self.since is None:
            self.since = now
            logger.warning(
                "turn %s holds what it has: the database is away (%s)", self.turn_id, error
            )
        waited = now - self.since
        if expire and waited >= settings.DB_OUTAGE_HOLD_SEC:
            raise DatabaseAway(waited) from error
        if not expire and waited >= LATE_CLOSE_GIVE_UP_SEC:
            raise DatabaseAway(waited) from error
