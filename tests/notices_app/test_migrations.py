"""Schedules, runs and outbox rows made before notices_app existed are still there after the
move, read through notices_app's models; queued tasks still name a function that exists."""

from datetime import timedelta

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.utils import timezone
from django_tasks_db.models import DBTaskResult

from notices_app.models import NoticeOutbox, Schedule

pytestmark = pytest.mark.django_db(transaction=True)

LAST_BEFORE_THE_MOVE = ("sessions_app", "0006_tool_approvals")
BEFORE_THE_MOVE = [LAST_BEFORE_THE_MOVE, ("notices_app", None)]


def migrate(targets):
    """Migrate to `targets`; the models of that state (every other app at its latest)."""
    executor = MigrationExecutor(connection)
    executor.migrate(targets)
    executor.loader.build_graph()
    targeted = {app for app, _ in targets}
    nodes = [node for node in executor.loader.graph.leaf_nodes() if node[0] not in targeted]
    nodes += [target for target in targets if target[1] is not None]
    return executor.loader.project_state(nodes).apps


def latest():
    return MigrationExecutor(connection).loader.graph.leaf_nodes()


@pytest.fixture
def before_the_move():
    yield migrate(BEFORE_THE_MOVE)
    migrate(latest())


def test_rows_made_before_the_move_are_read_by_notices_app(before_the_move):
    old = before_the_move
    now = timezone.now()
    user = old.get_model("auth", "User").objects.create(username="alice")
    schedule = old.get_model("sessions_app", "Schedule").objects.create(
        owner_id=user.id,
        session_id="chat-1",
        text="stretch",
        first_run_at=now,
        next_run_at=now + timedelta(minutes=5),
        repeat_every=5,
        repeat_unit="minutes",
        created_at=now,
    )
    old.get_model("sessions_app", "ScheduleRun").objects.create(
        schedule_id=schedule.id, run_at=now, fired_at=now, outcome="delivered"
    )
    old.get_model("sessions_app", "NoticeOutbox").objects.create(
        session_id="chat-1",
        message_id="m1",
        owner_id=user.id,
        payload={"content": "hello"},
        next_attempt_at=now,
        created_at=now,
    )
    task = old.get_model("django_tasks_database", "DBTaskResult").objects.create(
        status="READY",
        args_kwargs={"args": [schedule.id, (now + timedelta(minutes=5)).isoformat()], "kwargs": {}},
        task_path="sessions_app.tasks.fire_schedule",
        queue_name="default",
        backend_name="default",
        run_after=now + timedelta(minutes=5),
        exception_class_path="",
        traceback="",
    )

    migrate(latest())

    moved = Schedule.objects.get(id=schedule.id)
    assert (moved.owner.username, moved.text, moved.repeat_every) == ("alice", "stretch", 5)
    assert [run.outcome for run in moved.runs.all()] == ["delivered"]
    assert NoticeOutbox.objects.get().payload == {"content": "hello"}
    # The queued run still resolves to the task function, now in notices_app.
    assert DBTaskResult.objects.get(id=task.id).task.name == "fire_schedule"
    # New rows do not collide with the moved ones' ids.
    assert (
        Schedule.objects.create(owner_id=user.id, text="later", first_run_at=now, created_at=now).id
        > schedule.id
    )

    # And back: the reverse puts the rows under sessions_app again.
    old = migrate(BEFORE_THE_MOVE)
    assert old.get_model("sessions_app", "Schedule").objects.filter(text="stretch").exists()
    assert DBTaskResult.objects.get(id=task.id).task_path == "sessions_app.tasks.fire_schedule"
