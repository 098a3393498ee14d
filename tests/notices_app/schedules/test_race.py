"""Several workers on one run, on PostgreSQL: real threads released together by a barrier."""

import pytest
from django.utils import timezone
from django_tasks_db.models import DBTaskResult

from notices_app.models import ScheduleRun
from notices_app.services.schedules import schedule_create, schedule_fire
from sessions_app.services import sessions
from sessions_app.store import get_store
from tests.conftest import requires_postgres
from tests.helpers import run_in_threads

from .conftest import make_due, ready_tasks, worker

pytestmark = [requires_postgres, pytest.mark.django_db(transaction=True)]

RACERS = 4


def repeating_due_schedule(owner_id):
    sessions.session_create(owner_id=owner_id, session_id="chat-1")
    schedule = schedule_create(
        owner_id=owner_id, session_id="chat-1", text="drink water", every=2, unit="hours"
    )
    make_due(schedule)
    return schedule


def assert_fired_once(schedule):
    assert [n.content for n in get_store().get_proactive("chat-1")] == ["Reminder: drink water"]
    assert ScheduleRun.objects.filter(schedule=schedule).count() == 1
    (following,) = ready_tasks("fire_schedule")  # exactly one next run is queued
    schedule.refresh_from_db()
    assert str(following.id) == schedule.task_id
    assert schedule.next_run_at > timezone.now()


def test_racing_fires_of_one_run_deliver_one_notice(backend, alice):
    schedule = repeating_due_schedule(alice.id)
    # The racers stand in for the worker that would have run this queued task.
    DBTaskResult.objects.filter(id=schedule.task_id).delete()
    results = run_in_threads(
        lambda _: schedule_fire(schedule_id=schedule.id, run_at=schedule.next_run_at), RACERS
    )
    assert sorted(results) == ["delivered"] + ["skipped"] * (RACERS - 1)
    assert_fired_once(schedule)


def test_workers_racing_over_duplicate_tasks_of_one_run_fire_it_once(backend, alice):
    schedule = repeating_due_schedule(alice.id)
    # A duplicate of the queued run, as a recovery after a lost worker would add.
    original = DBTaskResult.objects.get(id=schedule.task_id)
    for _ in range(RACERS - 1):
        original.pk = None
        original.id = None
        original.save(force_insert=True)
    assert len(ready_tasks("fire_schedule")) == RACERS

    run_in_threads(lambda index: worker(f"racer-{index}").run(), RACERS)
    # Each racer ran one of the duplicates (the notice's own fan-out is another task).
    succeeded = DBTaskResult.objects.filter(status="SUCCESSFUL")
    assert [task.task_path.rsplit(".", 1)[-1] for task in succeeded].count(
        "fire_schedule"
    ) == RACERS
    assert_fired_once(schedule)
