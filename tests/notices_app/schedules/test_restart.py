"""A reminder survives the processes that made it: a new worker process fires it."""

import subprocess
import sys

import pytest

from notices_app.models import Schedule
from sessions_app.store import get_store
from tests.helpers import REPO, child_env, run_python

from .conftest import make_due

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_restart_between_scheduling_and_firing_loses_nothing(backend, alice):
    # One process takes the request through a real turn, then stops.
    made = run_python(
        "from sessions_app.services.sessions import session_create\n"
        "from sessions_app.runtime.turn.turns import turn_run\n"
        f"session_create(owner_id={alice.id}, session_id='chat-1')\n"
        "result = turn_run(session_id='chat-1', text='remind me in 1 hour to stretch')\n"
        "print(result.status)\n",
        JARVIS_SESSION__PERSISTENCE_BACKEND=backend,
    )
    assert made.returncode == 0, made.stderr
    assert made.stdout.strip().endswith("completed")
    schedule = Schedule.objects.get()
    make_due(schedule)  # the hour has passed while nothing ran

    # A worker process started afterwards fires it.
    fired = subprocess.run(
        [sys.executable, "manage.py", "db_worker", "--batch", "--no-startup-delay", "--no-reload"],
        cwd=REPO,
        env=child_env(JARVIS_SESSION__PERSISTENCE_BACKEND=backend),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert fired.returncode == 0, fired.stderr
    assert [n.content for n in get_store().get_proactive("chat-1")] == ["Reminder: stretch"]
    schedule.refresh_from_db()
    assert schedule.state == "done"


def test_a_run_whose_worker_was_killed_mid_task_fires_after_recovery(backend, alice, capsys):
    from django.core.management import call_command
    from django.utils import timezone
    from django_tasks_db.models import DBTaskResult

    from notices_app.services.schedules import schedule_create
    from sessions_app.services import sessions

    from .conftest import run_due_tasks

    sessions.session_create(owner_id=alice.id, session_id="chat-1")
    schedule = schedule_create(owner_id=alice.id, session_id="chat-1", text="stretch", in_seconds=9)
    make_due(schedule)
    # A worker claimed the run and was killed before it fired: its task stays RUNNING.
    DBTaskResult.objects.filter(id=schedule.task_id).update(
        status="RUNNING", started_at=timezone.now()
    )
    run_due_tasks()
    assert get_store().get_proactive("chat-1") == []

    call_command("recover_deliveries")  # a worker may still be running it: left alone
    assert "0 schedule run(s)" in capsys.readouterr().out
    call_command("recover_deliveries", "--workers-stopped")  # before workers start again
    assert "1 schedule run(s)" in capsys.readouterr().out
    run_due_tasks()
    assert [n.content for n in get_store().get_proactive("chat-1")] == ["Reminder: stretch"]
