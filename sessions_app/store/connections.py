"""The live-connection registry: one `LiveConnection` row per open WebSocket (docs/design.md §8, §11).

Rows of the database under both backends, so that every worker process sees every socket:
a delete in one worker must know about a tab attached through another. Each row points at
its session's row in the `Session` table (on the jsonl backend, the anchor row the store
keeps for the session's lock). A row counts as live while it is renewed within
LIVE_TIMEOUT_SEC and its worker is not known to be dead (sessions_app.store.workers); the rows of a
session go with its delete (the store backends' `delete`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from django.db import connection, transaction
from django.db.models import Q
from django.utils import timezone

from sessions_app.models import LiveConnection, Worker
from sessions_app.store.rows import delete_rows_of_session
from sessions_app.store.workers import current_worker_id, dead_cutoff, dead_workers

# A consumer renews its row every few seconds (services.connections.HEARTBEAT_SEC); rows not renewed
# for LIVE_TIMEOUT_SEC belong to a worker that died without closing its sockets.
LIVE_TIMEOUT_SEC = 30


@dataclass(frozen=True)
class Closed:
    """What `unregister` removed: the connection's session and user, and whether it was the
    session's last live connection."""

    session_id: str
    user_id: int | None
    last: bool


# The first key of the PostgreSQL advisory locks that order a session's socket rows (below).
CONNECTIONS_LOCK_CLASS = 0x4A43  # "JC"


def _hold_connections_of(session_id: str) -> None:
    """Until the transaction ends, be the only one adding or removing the session's socket
    rows, or asking whether any is left.

    Not the session row's lock: a turn's lease is written to that row, and a closing tab
    (`unregister`) that held it made every turn start of the session wait for the close's
    transaction — in a storm, for a thread that waited for the interpreter lock. On
    PostgreSQL an advisory lock of the session's own; on SQLite every transaction is
    IMMEDIATE (settings), so writers are one at a time already. Outside a transaction it
    waits for the holders and lets go at once.
    """
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT pg_advisory_xact_lock(%s, hashtext(%s))",
                [CONNECTIONS_LOCK_CLASS, session_id],
            )


def _cutoff():
    return timezone.now() - timedelta(seconds=LIVE_TIMEOUT_SEC)


def _live(session_id: str):
    return LiveConnection.objects.filter(
        session_id=session_id, heartbeat_at__gte=_cutoff()
    ).exclude(worker_id__in=dead_workers())


def _gone():
    """Rows that no longer count: not renewed in time, or held by a dead worker."""
    return LiveConnection.objects.filter(
        Q(heartbeat_at__lt=_cutoff()) | Q(worker_id__in=dead_workers())
    )


def _stale(owner_id: int | None):
    rows = LiveConnection.objects.filter(heartbeat_at__lt=_cutoff())
    return rows if owner_id is None else rows.filter(user_id=owner_id)


def register(*, session_id: str, channel_name: str, user_id: int | None) -> None:
    """Record a socket of this worker on an existing session, dropping the session's rows
    that no longer count. The caller holds the session's lock (store.locked)."""
    _hold_connections_of(session_id)
    now = timezone.now()
    _gone().filter(session_id=session_id).delete()
    LiveConnection.objects.update_or_create(
        channel_name=channel_name,
        defaults={
            "session_id": session_id,
            "user_id": user_id,
            "connected_at": now,
            "heartbeat_at": now,
            "worker_id": current_worker_id(),
        },
    )


def renew(*, channel_name: str) -> bool:
    """Renew a row; False when it is gone (swept, or its session was deleted).

    Plain SQL: every open socket runs this every HEARTBEAT_SEC, and the ORM's building of
    the UPDATE was most of its cost (hundreds of sockets: 1.2% of a worker's CPU)."""
    table = connection.ops.quote_name(LiveConnection._meta.db_table)
    now = connection.ops.adapt_datetimefield_value(timezone.now())
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {table} SET heartbeat_at = %s WHERE channel_name = %s",  # noqa: S608 - quoted name, bound values
            [now, channel_name],
        )
        return cursor.rowcount > 0


def unregister(*, channel_name: str) -> Closed | None:
    """Remove a socket's row; None when there is none.

    The session's sockets are held first (`_hold_connections_of`), so that two tabs closing
    at once cannot both see the other still open (and neither report the last one), and
    before the row is touched: whoever holds them (an open dropping stale rows, a delete)
    never waits for this row while this waits for them. Plain SQL: every closing tab runs
    this, and in a storm of closes the ORM's building of its three queries was 6% of a
    worker's CPU (docs/performance.md). On PostgreSQL the read takes the hold, and the
    delete and the count are one statement, which starts once the hold is granted and so
    sees every close and open that committed before it.
    """
    table = connection.ops.quote_name(LiveConnection._meta.db_table)
    postgresql = connection.vendor == "postgresql"
    hold = f", pg_advisory_xact_lock({CONNECTIONS_LOCK_CLASS}, hashtext(session_id))"
    # Part of the caller's transaction when there is one (a savepoint would be two more
    # round trips for every closing tab, docs/performance.md): nothing here is retried.
    with transaction.atomic(savepoint=False), connection.cursor() as cursor:
        cursor.execute(
            f"SELECT session_id, user_id{hold if postgresql else ''} FROM {table} "
            "WHERE channel_name = %s",
            [channel_name],
        )
        row = cursor.fetchone()
        if row is None:
            return None
        session_id, user_id = row[0], row[1]
        delete = f"DELETE FROM {table} WHERE channel_name = %s"
        live, params = _live_rows_sql(session_id)
        if postgresql:
            # The CTE's delete is not seen by the count (one snapshot): the row is left out.
            cursor.execute(
                f"WITH gone AS ({delete}) SELECT EXISTS ({live} AND channel_name <> %s)",
                [channel_name, *params, channel_name],
            )
            others = cursor.fetchone()[0]
        else:
            cursor.execute(delete, [channel_name])
            cursor.execute(f"SELECT EXISTS ({live})", params)
            others = cursor.fetchone()[0]
    return Closed(session_id=session_id, user_id=user_id, last=not others)


def _live_rows_sql(session_id: str) -> tuple[str, list]:
    """`_live(session_id)` as plain SQL and its parameters."""
    adapt = connection.ops.adapt_datetimefield_value
    return (
        f"SELECT 1 FROM {connection.ops.quote_name(LiveConnection._meta.db_table)} "
        "WHERE session_id = %s AND heartbeat_at >= %s AND worker_id NOT IN "
        f"(SELECT id FROM {connection.ops.quote_name(Worker._meta.db_table)} "
        "WHERE heartbeat_at < %s)",
        [session_id, adapt(_cutoff()), adapt(dead_cutoff())],
    )


def any_live(session_id: str) -> bool:
    """Whether a socket is attached, once the closes and opens under way have committed (a
    delete asks: a tab that is closing right now does not block it)."""
    _hold_connections_of(session_id)
    return _live(session_id).exists()


def live_count(session_id: str) -> int:
    return _live(session_id).count()


def stale_count(*, owner_id: int | None) -> int:
    """Rows of this user's sockets (None: everyone's) not renewed within LIVE_TIMEOUT_SEC."""
    return _stale(owner_id).count()


def stale_remove(*, owner_id: int | None) -> list[str]:
    """Remove the rows `stale_count` counts; returns their channel names."""
    stale = list(_stale(owner_id).values_list("channel_name", flat=True))
    _stale(owner_id).filter(channel_name__in=stale).delete()
    return stale


def remove_for_session(session_id: str) -> None:
    """Remove every row of a session that is being deleted (store backends' `delete`)."""
    delete_rows_of_session(LiveConnection, session_id)
