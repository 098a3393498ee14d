"""A worker silent for WORKER_DEAD_SEC is dead wherever it ran: its sockets no longer block a
delete and its turn leases are free — without waiting for their own, longer expiries."""

from datetime import timedelta

import pytest
from django.utils import timezone

from sessions_app.models import LiveConnection, Session, Worker
from sessions_app.runtime.turn.lease import SessionBusy, lease_acquire
from sessions_app.runtime.turn.turns import turn_run
from sessions_app.services import deletion
from sessions_app.store import NewEntry, get_store
from sessions_app.store.workers import worker_beat
from tests.sessions_app.runtime.conftest import assert_history_valid

pytestmark = pytest.mark.django_db(transaction=True)

ELSEWHERE = "other-machine:4242:0badc0de"  # a worker on another host: no pid to check


def worker_heard(seconds_ago: float) -> None:
    stamp = timezone.now() - timedelta(seconds=seconds_ago)
    Worker.objects.update_or_create(
        id=ELSEWHERE, defaults={"started_at": stamp, "heartbeat_at": stamp}
    )


def test_sockets_of_a_silent_worker_do_not_block_delete(alice, settings):
    get_store().create("s1", owner_id=alice.id)
    now = timezone.now()
    LiveConnection.objects.create(
        session_id="s1",
        channel_name="tab-on-the-other-machine",
        user=alice,
        connected_at=now,
        heartbeat_at=now,
        worker_id=ELSEWHERE,
    )
    worker_heard(seconds_ago=1)
    with pytest.raises(deletion.SessionConnected):
        deletion.session_delete(session_id="s1", owner_id=alice.id)

    worker_heard(seconds_ago=settings.WORKER_DEAD_SEC + 1)
    assert deletion.session_delete(session_id="s1", owner_id=alice.id) is True
    assert not LiveConnection.objects.exists()


def test_a_lease_of_a_silent_worker_on_another_machine_is_free(alice, settings):
    store = get_store()
    store.create("s2", owner_id=alice.id)
    # That worker's turn stored its start and the user's message, then the machine died.
    store.append(
        "s2",
        [
            NewEntry(kind="turn_start", turn_id="t-lost", data={"model": "offline"}),
            NewEntry(role="user", content="wait 60 seconds", turn_id="t-lost"),
        ],
    )
    Session.objects.filter(id="s2").update(
        lease_holder=f"{ELSEWHERE}:abcdef012345",
        lease_expires_at=timezone.now() + timedelta(seconds=15),
    )
    worker_heard(seconds_ago=1)
    with pytest.raises(SessionBusy):
        lease_acquire(session_id="s2", wait_sec=0)

    worker_heard(seconds_ago=settings.WORKER_DEAD_SEC + 1)
    result = turn_run(session_id="s2", text="what is 2+3", owner_id=alice.id)
    assert result.status == "completed"
    statuses = [e.data["status"] for e in store.get_messages("s2") if e.kind == "turn_end"]
    assert statuses == ["interrupted", "completed"]
    assert_history_valid("s2")


def test_a_worker_without_a_heartbeat_row_is_not_taken_for_dead(alice):
    """Only silence counts: a process that never beat (a command, a test) keeps its lease
    until the lease itself expires."""
    get_store().create("s3", owner_id=alice.id)
    Session.objects.filter(id="s3").update(
        lease_holder="never-beat:77:feedface:abcdef012345",
        lease_expires_at=timezone.now() + timedelta(seconds=15),
    )
    with pytest.raises(SessionBusy):
        lease_acquire(session_id="s3", wait_sec=0)


def test_a_beat_records_this_process(alice):
    worker_beat()
    worker_beat()  # renews the same row
    assert Worker.objects.count() == 1
