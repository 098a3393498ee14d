"""The `db` backend's turn lease: two fields of the session row.

`lease_holder` and `lease_expires_at` are taken with one conditional UPDATE and renewed by
the runtime's lease keeper while the turn runs. Nothing is held between statements, so no
model call or tool ever runs under a row lock. A crashed holder's lease is free as soon as
its worker stops heartbeating for WORKER_DEAD_SEC (sessions_app.store.workers, wherever the
worker ran), at once when the holder was a process on this machine that no longer exists,
and in any case after LEASE_TTL_SEC.

An abort from another process marks the holder with a trailing ABORT_MARK; the holder's
keeper sees it on its next poll.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from datetime import timedelta

import psycopg
from django.db import connection
from django.utils import timezone

from sessions_app.models import Session
from sessions_app.store.base import SessionNotFound
from sessions_app.store.lease import TurnLeaseBackend
from sessions_app.store.workers import current_worker_id, worker_is_dead

logger = logging.getLogger(__name__)

LEASE_TTL_SEC = 15.0
ABORT_MARK = "!"
# Ids per statement of the keeper's read: well under SQLite's 999 bound parameters.
_KEEP_BATCH = 500
_HOST = current_worker_id().split(":", 1)[0]


def _worker_of(holder: str) -> str:
    """The worker id inside a holder (`<worker id>:<turn token>[!]`)."""
    return holder.rstrip(ABORT_MARK).rsplit(":", 1)[0]


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


def _session_table() -> str:
    return connection.ops.quote_name(Session._meta.db_table)


def _expiry():
    return timezone.now() + timedelta(seconds=LEASE_TTL_SEC)


class DbTurnLease(TurnLeaseBackend):
    def __init__(
        self,
        session_id: str,
        owner_id: int | None,
        metas_returned: Callable[[str, list], list],
    ):
        super().__init__(session_id, owner_id)
        # The store's reading of a write's `RETURNING` of the session (DbStore._metas_of).
        self._metas_returned = metas_returned

    def _rows(self):
        return Session.objects.filter(id=self.session_id)

    def try_acquire(self) -> bool:
        # Every turn's start: one plain statement on Django's cursor (the ORM
        # building this UPDATE was 5% of a loaded worker's CPU, docs/performance.md).
        # It returns the session too: the turn reads it under the lease, and this is that
        # read, one statement fewer per turn.
        self.meta_when_taken = None
        now = timezone.now()
        adapt = connection.ops.adapt_datetimefield_value
        owned, owner = (
            ("", []) if self.owner_id is None else (" AND owner_id = %s", [self.owner_id])
        )
        taken = self._metas_returned(
            f"UPDATE {_session_table()} SET lease_holder = %s, lease_expires_at = %s"  # noqa: S608 - quoted name, bound values
            f" WHERE id = %s{owned} AND (lease_holder = '' OR lease_expires_at IS NULL"
            " OR lease_expires_at < %s)",
            [self.holder, adapt(_expiry()), self.session_id, *owner, adapt(now)],
        )
        if taken:
            self.meta_when_taken = taken[0]
            return True
        # Not taken: busy, or not there for this caller (only this path reads the row).
        current, owner_id = self._rows().values_list("lease_holder", "owner_id").first() or (
            None,
            None,
        )
        if current is None or (self.owner_id is not None and owner_id != self.owner_id):
            raise SessionNotFound(self.session_id)
        if current and (_holder_process_gone(current) or worker_is_dead(_worker_of(current))):
            logger.warning("taking over the lease of %s from dead %s", self.session_id, current)
            return bool(
                self._rows()
                .filter(lease_holder=current)
                .update(lease_holder=self.holder, lease_expires_at=_expiry())
            )
        return False

    @classmethod
    def keep(cls, leases):
        # The keeper asks this every WATCH_INTERVAL_SEC for every turn of the process: under a
        # burst, hundreds of ids. Through the ORM, preparing the IN list's parameters one by
        # one was 8% of a loaded worker's CPU (docs/performance.md); here the driver binds
        # them, and the database says which leases are due for renewal.
        ids = [lease.session_id for lease in leases]
        now = timezone.now()
        renew_before = connection.ops.adapt_datetimefield_value(
            now + timedelta(seconds=LEASE_TTL_SEC * 2 / 3)
        )
        table = _session_table()
        rows: dict[str, tuple[str, bool]] = {}
        if connection.vendor == "postgresql":
            # One array parameter, bound by the driver: quoting hundreds of ids into the
            # statement's text every round was 2% of a loaded worker's CPU.
            connection.ensure_connection()
            with psycopg.Cursor(connection.connection) as cursor:
                cursor.execute(
                    f"SELECT id, lease_holder,"  # noqa: S608 - table name quoted, values bound
                    f" (lease_expires_at IS NULL OR lease_expires_at < %s)"
                    f" FROM {table} WHERE id = ANY(%s)",
                    [renew_before, ids],
                )
                rows.update((row[0], (row[1], bool(row[2]))) for row in cursor.fetchall())
        else:
            rows = cls._lease_rows_in_batches(table, ids, renew_before)
        renew: list[str] = []
        stopping = []
        for lease in leases:
            mine = [lease.holder, lease.holder + ABORT_MARK]
            holder, due = rows.get(lease.session_id, ("", False))
            if not holder:
                # Not visible to this thread's connection: the session is gone (the turn's
                # next append says so) or the turn runs inside a caller's open transaction.
                continue
            if holder not in mine:
                logger.warning("turn of %s lost its lease (now %r)", lease.session_id, holder)
                stopping.append(lease)
                continue
            if holder == mine[1]:
                stopping.append(lease)
            if due:
                renew.extend(mine)
        if renew:
            Session.objects.filter(lease_holder__in=renew).update(
                lease_expires_at=now + timedelta(seconds=LEASE_TTL_SEC)
            )
        return stopping

    @staticmethod
    def _lease_rows_in_batches(table, ids, renew_before) -> dict[str, tuple[str, bool]]:
        rows: dict[str, tuple[str, bool]] = {}
        with connection.cursor() as cursor:
            for start in range(0, len(ids), _KEEP_BATCH):
                batch = ids[start : start + _KEEP_BATCH]
                cursor.execute(
                    f"SELECT id, lease_holder,"  # noqa: S608 - table name quoted, values bound
                    f" (lease_expires_at IS NULL OR lease_expires_at < %s)"
                    f" FROM {table} WHERE id IN ({', '.join(['%s'] * len(batch))})",
                    [renew_before, *batch],
                )
                rows.update((row[0], (row[1], bool(row[2]))) for row in cursor.fetchall())
        return rows

    def renew(self):
        with connection.cursor() as cursor:
            cursor.execute(
                f"UPDATE {_session_table()} SET lease_expires_at = %s"  # noqa: S608 - quoted name, bound values
                " WHERE id = %s AND lease_holder IN (%s, %s)",
                [
                    connection.ops.adapt_datetimefield_value(_expiry()),
                    self.session_id,
                    self.holder,
                    self.holder + ABORT_MARK,
                ],
            )
            return cursor.rowcount == 1

    def release(self):
        with connection.cursor() as cursor:
            cursor.execute(
                f"UPDATE {_session_table()} SET lease_holder = '', lease_expires_at = NULL"  # noqa: S608 - quoted name, bound values
                " WHERE id = %s AND lease_holder IN (%s, %s)",
                [self.session_id, self.holder, self.holder + ABORT_MARK],
            )


def request_abort(session_id: str) -> bool:
    """Mark the session's live lease for abort; False when no turn holds it."""
    rows = Session.objects.filter(id=session_id)
    current = rows.values_list("lease_holder", "lease_expires_at").first()
    if current is None or not current[0] or not current[1] or current[1] < timezone.now():
        return False
    if current[0].endswith(ABORT_MARK):
        return True
    return bool(rows.filter(lease_holder=current[0]).update(lease_holder=current[0] + ABORT_MARK))
