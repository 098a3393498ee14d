"""Commits that need not wait for the disk (PostgreSQL's asynchronous commit).

A turn's lease is bookkeeping: if the database crashed before the lease's commit reached
the disk, the turn that took it fails with the crash, and its lease would have expired
anyway. Waiting for the write-ahead log's flush on every acquire, renewal and release put
three disk syncs in every turn; under a burst of turn starts those syncs queue behind each
other (docs/performance.md, "Turn starts"). Such writes commit with
`synchronous_commit = off`: visible to every other transaction at once, made durable by the
next synchronous commit or within a fraction of a second, and never torn.

Elsewhere (SQLite, whose WAL mode with synchronous=NORMAL already does not sync a commit,
or inside a caller's transaction, whose durability is the caller's) this does nothing.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from django.db import connection, transaction


@contextmanager
def commit_unflushed() -> Iterator[None]:
    """Run the block in a transaction whose commit does not wait for the disk."""
    if connection.vendor != "postgresql" or connection.in_atomic_block:
        yield
        return
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("SET LOCAL synchronous_commit TO OFF")
        yield
