"""Limits on schedules (docs/design.md §14): how many one user may have, how often one may
repeat, a paginated list, and scheduled prompts counted against the owner's turn limits."""

from datetime import timedelta

import pytest
from django.core.cache import cache
from django.utils import timezone
from django_tasks_db.models import DBTaskResult

from notices_app.models import Schedule, ScheduleRun
from notices_app.services.schedules import schedule_create
from sessions_app.core.throttles import TurnRateThrottle
from sessions_app.runtime.turn import turns
from sessions_app.runtime.turn.turns import turn_run
from sessions_app.services import sessions
from sessions_app.store import get_store

from .conftest import make_due, ready_tasks, run_due_tasks

pytestmark = pytest.mark.django_db(transaction=True)


def reminder(api, text="stretch", **extra):
    return api.post("/api/schedules/", {"text": text, "in_seconds": 600, **extra}, format="json")


def test_past_max_schedules_per_user_the_api_answers_429(api, bob_api, settings):
    settings.MAX_SCHEDULES_PER_USER = 3
    ids = [reminder(api, f"r{n}").json()["id"] for n in range(3)]

    refused = reminder(api, "one too many")
    assert refused.status_code == 429
    assert refused.json()["code"] == "too_many_schedules"
    assert not Schedule.objects.filter(text="one too many").exists()
    assert len(ready_tasks("fire_schedule")) == 3
    assert reminder(bob_api).status_code == 201  # a limit per user

    api.delete(f"/api/schedules/{ids[0]}/")  # a cancelled one no longer counts
    assert reminder(api, "now it fits").status_code == 201


def test_past_max_schedules_per_user_the_tool_says_so(alice, settings):
    settings.MAX_SCHEDULES_PER_USER = 1
    sessions.session_create(owner_id=alice.id, session_id="chat-1")
    turn_run(session_id="chat-1", text="remind me in 10 minutes to stretch")

    result = turn_run(session_id="chat-1", text="remind me in 20 minutes to drink water")

    tool_result = next(e for e in result.entries if e.role == "tool")
    assert tool_result.is_error and "1 active schedules" in tool_result.content
    assert list(Schedule.objects.values_list("text", flat=True)) == ["stretch"]


def test_a_repeat_shorter_than_the_minimum_is_refused(api, settings):
    settings.MIN_SCHEDULE_REPEAT_SEC = 3600
    refused = reminder(api, every=30, unit="minutes")
    assert refused.status_code == 400 and "every 3600 seconds" in refused.json()["detail"]
    assert reminder(api, every=1, unit="hours").status_code == 201
    assert Schedule.objects.count() == 1


def test_the_list_comes_in_pages(api):
    made = [reminder(api, f"r{n}", in_seconds=60 * (n + 1)).json()["id"] for n in range(5)]
    first = api.get("/api/schedules/?limit=2").json()
    second = api.get(f"/api/schedules/?limit=2&offset={first['next_offset']}").json()
    last = api.get(f"/api/schedules/?limit=2&offset={second['next_offset']}").json()
    pages = [first, second, last]
    assert [s["id"] for page in pages for s in page["schedules"]] == made  # next run first
    assert last["next_offset"] is None
    assert api.get("/api/schedules/?limit=201").status_code == 400


def due_prompt(alice) -> Schedule:
    sessions.session_create(owner_id=alice.id, session_id="chat-1")
    schedule = schedule_create(
        owner_id=alice.id, session_id="chat-1", kind="prompt", text="what is 6*7", in_seconds=60
    )
    make_due(schedule)
    return schedule


def notices(session_id: str) -> list[str]:
    return [notice.content for notice in get_store().get_proactive(session_id)]


def assert_deferred(schedule: Schedule) -> None:
    """Nothing fired; the schedule still waits for the same run, queued again for later."""
    assert notices("chat-1") == []
    assert not ScheduleRun.objects.exists()
    waiting = Schedule.objects.get(id=schedule.id)
    assert (waiting.state, waiting.next_run_at) == ("active", schedule.next_run_at)
    retry = DBTaskResult.objects.get(id=waiting.task_id)
    assert retry.status == "READY" and retry.run_after > timezone.now()


def run_the_retry_now(schedule: Schedule) -> None:
    DBTaskResult.objects.filter(id=Schedule.objects.get(id=schedule.id).task_id).update(
        run_after=timezone.now() - timedelta(seconds=1)
    )
    run_due_tasks()


def test_a_scheduled_prompt_over_the_turn_rate_runs_later(api, alice, monkeypatch):
    monkeypatch.setattr(TurnRateThrottle, "THROTTLE_RATES", {"turns": "1/min"})
    schedule = due_prompt(alice)
    api.post("/api/sessions/chat-1/messages/", {"text": "hi"}, format="json")  # the one turn

    run_due_tasks()
    assert_deferred(schedule)

    cache.clear()  # the minute has passed
    run_the_retry_now(schedule)
    assert notices("chat-1") == ["6*7 = 42."]


def test_a_scheduled_prompt_at_max_turns_per_user_runs_later(alice, settings):
    settings.MAX_TURNS_PER_USER = 1
    schedule = due_prompt(alice)

    with turns._user_slot(alice.id):  # alice's one turn is running
        run_due_tasks()
    assert_deferred(schedule)

    run_the_retry_now(schedule)
    assert notices("chat-1") == ["6*7 = 42."]
