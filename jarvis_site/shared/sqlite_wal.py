"""Keep each SQLite database's write-ahead log open for the life of the process.

Django closes a thread's connection after every request, and the turn threads close theirs
after every turn. In WAL mode the last connection to close a database checkpoints the log
into the database file, syncs it to disk and deletes the log; the next connection creates
it again. With one short-lived connection at a time that happened on almost every request
and every turn, and cost 1-20 ms each (more than everything else in a short turn, on a busy
disk). One idle connection per database file, opened with the first Django connection and
never used for a transaction, means a closing connection is never the last one: the log is
checkpointed by SQLite's automatic checkpoint on commit (every 1,000 pages) instead.

The keeper is closed at exit, so a process that ends normally still leaves no log behind.
"""

from __future__ import annotations

import atexit
import sqlite3
import threading

_keepers: dict[str, sqlite3.Connection] = {}
_lock = threading.Lock()


def keep_wal_open(sender, connection, **kwargs) -> None:
    """A `connection_created` receiver: open the keeper of this connection's database once."""
    if connection.vendor != "sqlite" or connection.is_in_memory_db():
        return
    name = str(connection.settings_dict["NAME"])
    with _lock:
        if name in _keepers:
            return
        # Autocommit (isolation_level=None) and a finished read: the keeper maps the log's
        # index, which is what makes it count as open, but never holds a read transaction,
        # which would stop checkpoints from moving past it.
        keeper = sqlite3.connect(name, isolation_level=None, check_same_thread=False)
        keeper.execute("SELECT 1 FROM sqlite_master LIMIT 1").fetchall()
        _keepers[name] = keeper


@atexit.register
def _close_keepers() -> None:
    with _lock:
        for keeper in _keepers.values():
            keeper.close()
        _keepers.clear()
