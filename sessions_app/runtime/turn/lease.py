"""One turn per session at a time, across threads and processes (docs/design.md §5.5).

A turn holds its session's lease while it runs. How the holding is recorded is the
backend's business: the store gives each lease its backend half (`store.turn_lease`; the db
backend keeps it in the session row, the jsonl backend in an flock beside the files, see
sessions_app.store.lease). This module does what is the same everywhere: waiting for a busy
session up to a deadline (SessionBusy after it), and one keeper thread per process that
keeps every held lease alive and watches for aborts.

Abort from another process: the requester marks the lease through the store
(`lease_request_abort`) and the holder's keeper, polling every WATCH_INTERVAL_SEC, sees the
mark. This works with any channel layer, including none shared. The same round runs the
poll hooks registered with `lease_poll_hook_register` (in an AppConfig.ready): sessions_app
registers the one that looks for decisions on the tool approvals this process waits on
(runtime.turn.approvals), which any worker may write. The lease knows nothing of what they poll.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import time
from collections.abc import Callable
from typing import TypeVar

from django.conf import settings
from django.db import connection

from jarvis_site.shared import metrics
from jarvis_site.shared.errors import Code, DomainError
from jarvis_site.shared.outages import database_away
from sessions_app.core.ids import validate_session_id
from sessions_app.runtime.loop.executors import start_in_pool
from sessions_app.store import get_store
from sessions_app.store.base import SessionMeta
from sessions_app.store.lease import TurnLeaseBackend
from sessions_app.store.workers import heartbeat_running, heartbeat_start

T = TypeVar("T")
logger = logging.getLogger(__name__)

WATCH_INTERVAL_SEC = 0.2
ACQUIRE_POLL_SEC = 0.05

# Run by the keeper once per round while any turn of this process runs.
_poll_hooks: list[Callable[[], None]] = []


def lease_poll_hook_register(hook: Callable[[], None]) -> None:
    """Have the lease keeper call `hook` every WATCH_INTERVAL_SEC while a turn runs here
    (called from an AppConfig.ready; registering the same hook again is harmless). A hook
    polls for something a running turn waits on that another process may write."""
    if hook not in _poll_hooks:
        _poll_hooks.append(hook)


class SessionBusy(DomainError):
    """Another turn of this session is still running (the API answers 409 session_busy)."""

    code = Code.SESSION_BUSY

    def __init__(self, message: str = "the previous request is still being processed"):
        super().__init__(message)


class TurnLease:
    """Held by one running turn; `watch` hands it to the keeper, which renews it and sees
    aborts."""

    def __init__(self, backend: TurnLeaseBackend):
        self.backend = backend
        self.session_id = backend.session_id
        self.held = False  # set by the thread that took it; whoever releases it clears it

    @staticmethod
    def made_without_query() -> bool:
        """Whether `for_session` makes no query now (so the event loop may call it): only
        the process's first lease starts the heartbeat, which beats once at once."""
        return not settings.WORKER_HEARTBEAT or heartbeat_running()

    @staticmethod
    def for_session(session_id: str, owner_id: int | None = None) -> TurnLease:
        """A lease of the session, not yet acquired; with `owner_id`, of that person's
        session only (its taking raises SessionNotFound for anyone else's)."""
        validate_session_id(session_id)
        if settings.WORKER_HEARTBEAT:
            heartbeat_start()  # so that others can tell when this process dies
        return TurnLease(get_store().turn_lease(session_id, owner_id))

    def acquire(self, wait_sec: float) -> TurnLease:
        deadline = time.monotonic() + wait_sec
        while not self._take():
            if time.monotonic() >= deadline:
                metrics.LEASE_BUSY.inc()
                raise SessionBusy()
            time.sleep(ACQUIRE_POLL_SEC)
        return self

    def _take(self) -> bool:
        self.held = self.backend.try_acquire()
        return self.held

    def _take_then(self, then: Callable[[SessionMeta | None], T]) -> tuple[bool, T | None]:
        if not self._take():
            return False, None
        # If `then` fails, the lease is held still: `held` says so.
        return True, then(self.backend.meta_when_taken)

    async def acquire_async(
        self, wait_sec: float, then: Callable[[SessionMeta | None], T], abort=None
    ) -> T:
        """`acquire` for a coroutine (it waits without holding a thread), then `then(meta)` in
        the same pool call as the taking: a turn's first writes leave with its lease, one trip
        through the pool's queue and back to a busy event loop instead of two. `meta` is the
        session as the taking found it when the store's lease says (else None). If `then`
        raises, the lease is held (`held`) and the caller releases it. A Stop of the turn
        (`abort`) while the taking waits for a thread moves it ahead (executors.start_in_pool)."""
        deadline = time.monotonic() + wait_sec
        while True:
            # Ahead of other turns' writes, as the rest of a turn's start (runtime.loop.executors).
            taken, result = await start_in_pool(abort, self._take_then, then)
            if taken:
                return result
            if time.monotonic() >= deadline:
                metrics.LEASE_BUSY.inc()
                raise SessionBusy()
            await asyncio.sleep(ACQUIRE_POLL_SEC)

    def watch(self, on_abort: Callable[[], None]) -> None:
        """Keep the lease renewed and call `on_abort` (from another thread) when an abort is
        requested or the lease is lost, until `release`."""
        _keeper.add(self, on_abort)

    def release(self) -> None:
        _keeper.discard(self)
        self.backend.release()
        self.held = False

    def unwatch(self) -> None:
        """Stop renewing the lease without releasing it (it could not be): it lapses after
        its time to live, and the session's next turn takes it."""
        _keeper.discard(self)


class _LeaseKeeper:
    """One thread per process renews every lease the process holds and looks for abort
    marks, a few queries per interval however many turns run (a thread per turn would be
    hundreds of threads and thousands of queries a second under load)."""

    def __init__(self):
        self._watched: dict[TurnLease, Callable[[], None]] = {}
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._pid: int | None = None

    def add(self, lease: TurnLease, on_abort: Callable[[], None]) -> None:
        with self._lock:
            self._watched[lease] = on_abort
            if self._pid != os.getpid():  # first use in this process (or a forked child)
                self._pid = os.getpid()
                threading.Thread(target=self._run, name="turn-leases", daemon=True).start()
        self._wake.set()

    def discard(self, lease: TurnLease) -> None:
        with self._lock:
            self._watched.pop(lease, None)

    def _run(self) -> None:
        while True:
            with self._lock:
                watched = list(self._watched.items())
            if not watched:
                connection.close()  # hold no connection while no turn runs
                self._wake.wait()
                self._wake.clear()
                continue
            self._keep(watched)
            # What a hook waits for waits inside a watched turn (an approval does), so this
            # loop runs while any does.
            for hook in list(_poll_hooks):
                try:
                    hook()
                except Exception:  # noqa: BLE001 - see _keep: the keeper must outlive a failure
                    logger.exception("lease poll hook %s failed once", hook.__name__)
            time.sleep(WATCH_INTERVAL_SEC)

    @staticmethod
    def _keep(watched: list[tuple[TurnLease, Callable[[], None]]]) -> None:
        """Keep each kind of backend lease in one go; stop the turns that must stop."""
        by_kind: dict[type, list[tuple[TurnLease, Callable[[], None]]]] = {}
        for lease, on_abort in watched:
            by_kind.setdefault(type(lease.backend), []).append((lease, on_abort))
        for kind, items in by_kind.items():
            try:
                stopping = kind.keep([lease.backend for lease, _ in items])
            except Exception as error:  # noqa: BLE001
                # Whatever the failure, the keeper thread goes on: if it died, every lease of
                # this process would lapse and another worker could start a second turn in
                # the same session. The next round tries again.
                if database_away(error):
                    # Closed, or every round after the outage would meet the dead connection
                    # and the leases would lapse under turns still running (§32). Said once.
                    connection.close()
                    if not _keeper_away.is_set():
                        _keeper_away.set()
                        logger.warning("lease watch: the database is away (%s)", error)
                    continue
                logger.exception("lease watch failed once")
                continue
            _keeper_away.clear()
            stopping_ids = {id(backend) for backend in stopping}
            for lease, on_abort in items:
                if id(lease.backend) in stopping_ids:
                    on_abort()


_keeper = _LeaseKeeper()
_keeper_away = threading.Event()  # the keeper met a database outage and said so


def lease_acquire(*, session_id: str, wait_sec: float) -> TurnLease:
    """Take the session's turn lease, waiting up to `wait_sec`; raise SessionBusy after."""
    return TurnLease.for_session(session_id).acquire(wait_sec)


def lease_request_abort(*, session_id: str) -> bool:
    """Ask whichever process holds the lease to abort its turn; False when none runs."""
    validate_session_id(session_id)
    return get_store().request_turn_abort(session_id)
