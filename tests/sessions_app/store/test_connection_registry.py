"""The socket registry orders a session's opens and closes without the session row's lock,
which a turn's lease writes: a tab closing while a turn starts never makes the turn wait.
PostgreSQL, real threads, each with its own connection; the interleavings are made by the
test (a close that holds its transaction open until released), not by timing."""

import threading

import pytest
from django.db import connection, connections, transaction
from django.utils import timezone

from sessions_app.models import LiveConnection
from sessions_app.runtime.turn.lease import lease_acquire
from sessions_app.store import connections as registry
from sessions_app.store import get_store
from tests.conftest import requires_postgres
from tests.helpers import GUARD_SEC, eventually

pytestmark = [pytest.mark.django_db(transaction=True), requires_postgres, pytest.mark.postgres]


def _socket(session_id: str, channel_name: str, user) -> None:
    now = timezone.now()
    LiveConnection.objects.create(
        session_id=session_id,
        channel_name=channel_name,
        user=user,
        connected_at=now,
        heartbeat_at=now,
        worker_id="",
    )


class HeldClose:
    """`unregister` of one socket in a thread whose transaction stays open until `commit()`:
    a tab in the middle of closing."""

    def __init__(self, channel_name: str):
        self.closed = None
        self.backend_pid = None
        self._inside = threading.Event()
        self._commit = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(channel_name,))

    def _run(self, channel_name):
        try:
            with transaction.atomic():
                self.backend_pid = connection.connection.info.backend_pid
                self.closed = registry.unregister(channel_name=channel_name)
                self._inside.set()
                assert self._commit.wait(GUARD_SEC)
        finally:
            connections.close_all()

    def __enter__(self):
        self._thread.start()
        assert self._inside.wait(GUARD_SEC), "the close never got inside its transaction"
        return self

    def commit(self):
        self._commit.set()
        self._thread.join(GUARD_SEC)

    def __exit__(self, *exc):
        self.commit()


def test_a_turn_takes_its_lease_while_a_tab_of_the_session_is_closing(alice):
    get_store().create("s-closing", owner_id=alice.id)
    _socket("s-closing", "tab-1", alice)
    with HeldClose("tab-1") as closing:
        # On this thread's own connection, with the close's transaction still open. A lock
        # wait here would be a failure, not a delay: PostgreSQL gives up after lock_timeout.
        with transaction.atomic():
            with connection.cursor() as cursor:
                cursor.execute(f"SET LOCAL lock_timeout = '{GUARD_SEC}s'")
            lease = lease_acquire(session_id="s-closing", wait_sec=0)
        lease.release()
        closing.commit()
    assert closing.closed is not None and closing.closed.last


def test_two_tabs_closing_at_once_report_the_last_exactly_once(alice):
    get_store().create("s-two-tabs", owner_id=alice.id)
    _socket("s-two-tabs", "tab-a", alice)
    _socket("s-two-tabs", "tab-b", alice)
    second: dict = {}

    def close_b():
        try:
            second["closed"] = registry.unregister(channel_name="tab-b")
        finally:
            connections.close_all()

    with HeldClose("tab-a") as first:
        # tab-a has removed its row and counted tab-b as still open; tab-b's close starts now
        # and must wait for tab-a's commit, or it would count tab-a as open in turn.
        closer = threading.Thread(target=close_b)
        closer.start()
        eventually(
            lambda: _waiting_on_a_lock_of_anyone_but(first.backend_pid),
            what="tab-b's close waits for tab-a's",
        )
        assert "closed" not in second
        first.commit()
        closer.join(GUARD_SEC)
    assert not first.closed.last
    assert second["closed"].last
    assert not LiveConnection.objects.filter(session_id="s-two-tabs").exists()


def _waiting_on_a_lock_of_anyone_but(pid: int) -> bool:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
            "AND wait_event_type = 'Lock' AND pid <> %s AND pid <> pg_backend_pid()",
            [pid],
        )
        return cursor.fetchone()[0] > 0


def test_a_delete_waits_for_a_closing_tab_and_then_goes_ahead(alice):
    """The delete asks for open sockets after the close under way has committed: the tab
    that is closing does not make it a 409."""
    from sessions_app.services import deletion

    get_store().create("s-delete", owner_id=alice.id)
    _socket("s-delete", "tab-1", alice)
    result: dict = {}

    def delete():
        try:
            result["deleted"] = deletion.session_delete(session_id="s-delete", owner_id=alice.id)
        except Exception as error:  # noqa: BLE001 - asserted below
            result["error"] = error
        finally:
            connections.close_all()

    with HeldClose("tab-1") as closing:
        deleter = threading.Thread(target=delete)
        deleter.start()
        eventually(
            lambda: _waiting_on_a_lock_of_anyone_but(closing.backend_pid),
            what="the delete waits for the close",
        )
        closing.commit()
        deleter.join(GUARD_SEC)
    assert result == {"deleted": True}
    assert get_store().get_meta("s-delete") is None


def test_a_tab_closing_while_an_open_holds_the_sockets_has_not_locked_its_row(alice):
    """An open holds the session's sockets and drops the session's stale rows. A tab of a
    stale row closing meanwhile waits for the hold before it touches its row, or the two
    would wait for each other (PostgreSQL would end one of them as a deadlock)."""
    get_store().create("s-stale", owner_id=alice.id)
    _socket("s-stale", "tab-stale", alice)
    holding = threading.Event()
    release = threading.Event()
    opener: dict = {}
    closed: dict = {}

    def open_holding_the_sockets():
        try:
            with transaction.atomic():
                opener["pid"] = connection.connection.info.backend_pid
                registry._hold_connections_of("s-stale")
                holding.set()
                assert release.wait(GUARD_SEC)
                with connection.cursor() as cursor:
                    # What an open does to the session's stale rows: it must not wait.
                    cursor.execute(f"SET LOCAL lock_timeout = '{GUARD_SEC}s'")
                    cursor.execute(
                        "SELECT 1 FROM sessions_app_liveconnection WHERE channel_name = %s "
                        "FOR UPDATE NOWAIT",
                        ["tab-stale"],
                    )
        except Exception as error:  # noqa: BLE001 - asserted below
            opener["error"] = error
        finally:
            connections.close_all()

    def close():
        try:
            closed["closed"] = registry.unregister(channel_name="tab-stale")
        finally:
            connections.close_all()

    holder = threading.Thread(target=open_holding_the_sockets)
    holder.start()
    assert holding.wait(GUARD_SEC)
    closer = threading.Thread(target=close)
    closer.start()
    eventually(
        lambda: _waiting_on_a_lock_of_anyone_but(opener["pid"]),
        what="the close waits for the open's hold",
    )
    release.set()
    holder.join(GUARD_SEC)
    closer.join(GUARD_SEC)
    assert "error" not in opener, opener.get("error")
    assert closed["closed"].session_id == "s-stale" and closed["closed"].last
