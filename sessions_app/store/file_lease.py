"""The `jsonl` backend's turn lease: an flock on `<id>.turn.lock` beside the session's files.

The lock is held for the turn; the kernel drops it when the holding process dies, so a
crashed holder never keeps a session busy. An abort from another process creates
`<id>.turn.abort`, which the holder's keeper looks for on every poll.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from sessions_app.store.base import SessionNotFound
from sessions_app.store.lease import TurnLeaseBackend


def _lock_path(root: Path, session_id: str) -> Path:
    return root / f"{session_id}.turn.lock"


def _abort_path(root: Path, session_id: str) -> Path:
    return root / f"{session_id}.turn.abort"


class FileTurnLease(TurnLeaseBackend):
    def __init__(self, store, session_id: str, owner_id: int | None = None):
        super().__init__(session_id, owner_id)
        self.store = store
        self.lock_path = _lock_path(store.root, session_id)
        self.abort_path = _abort_path(store.root, session_id)
        self._fd: int | None = None

    def try_acquire(self) -> bool:
        meta = self.store.get_meta(self.session_id)
        if meta is None or (self.owner_id is not None and meta.owner_id != self.owner_id):
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

    @classmethod
    def keep(cls, leases):
        # Nothing to renew: the flock lasts as long as the process holds it.
        return [lease for lease in leases if lease.abort_path.exists()]

    def release(self):
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


def request_abort(root: Path, session_id: str) -> bool:
    """Leave an abort mark for the turn holding the session's lock; False when none does."""
    try:
        fd = os.open(_lock_path(root, session_id), os.O_RDWR)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        _abort_path(root, session_id).touch()
        return True
    finally:
        os.close(fd)  # closing also drops the probe's lock if it got one
    return False
