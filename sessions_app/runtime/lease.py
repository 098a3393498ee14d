"""One turn per session at a time, across threads and processes (DESIGN §5.5).

db backend: a lease in the session row (`lease_holder`, `lease_expires_at`), taken with one
conditional UPDATE and renewed by a watcher thread while the turn runs. Nothing is held
between statements, so no model call or tool ever runs under a row lock; a crashed holder's
lease is free as soon as its worker stops heartbeating for WORKER_DEAD_SEC (sessions_app.workers,
wherever the worker ran), at once when the holder was a process on this machine that no longer
exists, and in any case after LEASE_TTL_SEC.

jsonl backend: an flock on `<id>.turn.lock` in SESSIONS_DIR, held for the turn; the kernel
drops it when the holding process dies.

Abort from another process: the requester marks the lease (db: the holder gets a trailing
"!"; jsonl: a `<id>.turn.abort` file) and the holder's watcher, polling every
WATCH_INTERVAL_SEC, sees it. This works with any channel layer, including none shared.
The same poll looks for decisions on the tool approvals this process waits on
(runtime.approvals), which may be written by any worker.
"""

from __future__ import annotations

import asyncio
import fcntl
import logging
import os
import threading
import time
import uuid
from abc import ABC, abstractmethod
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

from django.conf import settings
from django.db import DatabaseError, connection
from django.db.models import Q
from django.utils import timezone

from sessions_app.ids import validate_session_id
from sessions_app.runtime.approvals import approval_decisions_poll
from sessions_app.store import SessionNotFound, get_store
from sessions_app.workers import current_worker_id, heartbeat_start, worker_is_dead, worker_of

logger = logging.getLogger(__name__)

LEASE_TTL_SEC = 15.0
WATCH_INTERVAL_SEC = 0.2
ACQUIRE_POLL_SEC = 0.05
ABORT_MARK = "!"
_HOST = current_worker_id().split(":", 1)[0]


class SessionBusy(Exception):
    """Another turn of this session is still running (the API answers 409 session_busy)."""

    code = "session_busy"

    def __init__(self, message: str = "the previous request is still being processed"):
        super().__init__(message)


def _new_holder() -> str:
    # `<worker id>:<token>`: the worker id (host:pid:boot) lets a waiter see that the holder's
    # process is gone — on this machine by its pid, anywhere by its silent heartbeat.
    return f"{current_worker_id()}:{uuid.uuid4().hex[:12]}"


def _holder_process_gone(holder: str) -> bool:
    host, _, rest = holder.rstrip(ABORT_MARK).partition(":")
    pid_text = rest.partition(":")[0]
    if host != _HOST or not pid_text.isdigit() or int(pid_text) == os.getpid():
        return False
    try:
        os.kill(int(pid_text), 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


class TurnLease(ABC):
    """Held by one running turn; `watch` starts the thread that renews it and sees aborts."""

    def __init__(self, session_id: str):
        self.session_id = session_id
        self.holder = _new_holder()

    @staticmethod
    def for_session(session_id: str) -> TurnLease:
        """A lease of the configured backend's kind, not yet acquired."""
        validate_session_id(session_id)
        if settings.WORKER_HEARTBEAT:
            heartbeat_start()  # so that others can tell when this process dies
        return _lease_class()(session_id)

    @abstractmethod
    def _try_acquire(self) -> bool:
        """Take the lease if it is free (or its holder is gone); never blocks."""

    @abstractmethod
    def _poll(self, on_abort: Callable[[], None]) -> None:
        """Keep the lease alive and call `on_abort` when an abort was requested."""

    @classmethod
    def poll_all(cls, watched: list[tuple[TurnLease, Callable[[], None]]]) -> None:
        """`_poll` every watched lease of this kind (a kind may do it in one query)."""
        for lease, on_abort in watched:
            lease._poll(on_abort)

    @abstractmethod
    def _release(self) -> None:
        """Give the lease up (only if still ours)."""

    def acquire(self, wait_sec: float) -> TurnLease:
        deadline = time.monotonic() + wait_sec
        while not self._try_acquire():
            if time.monotonic() >= deadline:
                raise SessionBusy()
            time.sleep(ACQUIRE_POLL_SEC)
        return self

    async def acquire_async(self, wait_sec: float) -> TurnLease:
        """`acquire` for a coroutine: it waits without holding a thread."""
        from sessions_app.runtime.executors import in_pool

        deadline = time.monotonic() + wait_sec
        while not await in_pool("store", self._try_acquire):
            if time.monotonic() >= deadline:
                raise SessionBusy()
            await asyncio.sleep(ACQUIRE_POLL_SEC)
        return self

    def watch(self, on_abort: Callable[[], None]) -> None:
        """Keep the lease renewed and call `on_abort` (from another thread) when an abort is
        requested, until `release`."""
        _keeper.add(self, on_abort)

    def release(self) -> None:
        _keeper.discard(self)
        self._release()


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
            by_kind: dict[type, list] = {}
            for lease, on_abort in watched:
                by_kind.setdefault(type(lease), []).append((lease, on_abort))
            for kind, items in by_kind.items():
                try:
                    kind.poll_all(items)
                except (DatabaseError, OSError):
                    logger.exception("lease watch failed once")
            # Every approval waits inside a watched turn, so this loop runs while any does.
            try:
                approval_decisions_poll()
            except DatabaseError:
                logger.exception("approval watch failed once")
            time.sleep(WATCH_INTERVAL_SEC)


_keeper = _LeaseKeeper()


class DbTurnLease(TurnLease):
    def _rows(self):
        from sessions_app.models import Session

        return Session.objects.filter(id=self.session_id)

    def _expiry(self):
        return timezone.now() + timedelta(seconds=LEASE_TTL_SEC)

    def _try_acquire(self) -> bool:
        now = timezone.now()
        free = Q(lease_holder="") | Q(lease_expires_at__isnull=True) | Q(lease_expires_at__lt=now)
        if (
            self._rows()
            .filter(free)
            .update(lease_holder=self.holder, lease_expires_at=self._expiry())
        ):
            return True
        current = self._rows().values_list("lease_holder", flat=True).first()
        if current is None:
            raise SessionNotFound(self.session_id)
        if current and (_holder_process_gone(current) or worker_is_dead(worker_of(current))):
            logger.warning("taking over the lease of %s from dead %s", self.session_id, current)
            return bool(
                self._rows()
                .filter(lease_holder=current)
                .update(lease_holder=self.holder, lease_expires_at=self._expiry())
            )
        return False

    def _poll(self, on_abort):
        self.poll_all([(self, on_abort)])

    @classmethod
    def poll_all(cls, watched):
        from sessions_app.models import Session

        rows = {
            row[0]: row[1:]
            for row in Session.objects.filter(
                id__in=[lease.session_id for lease, _ in watched]
            ).values_list("id", "lease_holder", "lease_expires_at")
        }
        now = timezone.now()
        renew: list[str] = []
        for lease, on_abort in watched:
            mine = [lease.holder, lease.holder + ABORT_MARK]
            current = rows.get(lease.session_id)
            if current is None or not current[0]:
                # Not visible to this thread's connection: the session is gone (the turn's
                # next append says so) or the turn runs inside a caller's open transaction.
                continue
            if current[0] not in mine:
                logger.warning("turn of %s lost its lease (now %r)", lease.session_id, current)
                on_abort()
                continue
            if current[0] == mine[1]:
                on_abort()
            remaining = (current[1] - now).total_seconds() if current[1] else 0
            if remaining < LEASE_TTL_SEC * 2 / 3:
                renew.extend(mine)
        if renew:
            Session.objects.filter(lease_holder__in=renew).update(
                lease_expires_at=now + timedelta(seconds=LEASE_TTL_SEC)
            )

    def _release(self):
        self._rows().filter(lease_holder__in=[self.holder, self.holder + ABORT_MARK]).update(
            lease_holder="", lease_expires_at=None
        )


class FileTurnLease(TurnLease):
    def __init__(self, session_id: str):
        super().__init__(session_id)
        root = Path(settings.SESSIONS_DIR)
        self.lock_path = root / f"{session_id}.turn.lock"
        self.abort_path = root / f"{session_id}.turn.abort"
        self._fd: int | None = None

    def _try_acquire(self) -> bool:
        if get_store().get_meta(self.session_id) is None:
            raise SessionNotFound(self.session_id)
        fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        # The previous holder unlinks the file on release; a lock won on an unlinked file
        # guards nothing, so the path must still name the file we locked.
        try:
            same = os.fstat(fd).st_ino == os.stat(self.lock_path).st_ino
        except FileNotFoundError:
            same = False
        if not same:
            os.close(fd)
            return False
        os.ftruncate(fd, 0)
        os.write(fd, self.holder.encode())
        self._fd = fd
        self.abort_path.unlink(missing_ok=True)  # meant for a turn that has already ended
        return True

    def _poll(self, on_abort):
        if self.abort_path.exists():
            on_abort()

    def _release(self):
        if self._fd is None:
            return
        # A delete removes the session's files while holding this lease; a turn of a session
        # created again since may own a new lock file at the same path, which is not ours.
        try:
            ours = os.fstat(self._fd).st_ino == os.stat(self.lock_path).st_ino
        except FileNotFoundError:
            ours = False
        if ours:
            self.abort_path.unlink(missing_ok=True)
            self.lock_path.unlink(missing_ok=True)
        os.close(self._fd)
        self._fd = None


def _lease_class():
    if settings.JARVIS_SESSION__PERSISTENCE_BACKEND == "jsonl":
        return FileTurnLease
    return DbTurnLease


def lease_acquire(*, session_id: str, wait_sec: float) -> TurnLease:
    """Take the session's turn lease, waiting up to `wait_sec`; raise SessionBusy after."""
    return TurnLease.for_session(session_id).acquire(wait_sec)


def lease_request_abort(*, session_id: str) -> bool:
    """Ask whichever process holds the lease to abort its turn; False when none runs."""
    validate_session_id(session_id)
    if _lease_class() is FileTurnLease:
        probe = FileTurnLease(session_id)
        try:
            fd = os.open(probe.lock_path, os.O_RDWR)
        except FileNotFoundError:
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            probe.abort_path.touch()
            return True
        finally:
            os.close(fd)  # closing also drops the probe's lock if it got one
        return False
    from sessions_app.models import Session

    row = Session.objects.filter(id=session_id).values_list("lease_holder", "lease_expires_at")
    current = row.first()
    if current is None or not current[0] or not current[1] or current[1] < timezone.now():
        return False
    if current[0].endswith(ABORT_MARK):
        return True
    return bool(
        Session.objects.filter(id=session_id, lease_holder=current[0]).update(
            lease_holder=current[0] + ABORT_MARK
        )
    )
