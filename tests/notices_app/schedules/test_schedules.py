"""Schedules through the real task worker: what fires, where its notice lands, and once."""

from datetime import timedelta

import pytest
from django.utils import timezone

from notices_app.models import Schedule, ScheduleRun
from notices_app.services.schedules import (
    ScheduleInvalid,
    schedule_cancel,
    schedule_create,
    schedule_fire,
)
from sessions_app.services import deletion, sessions
from sessions_app.store import get_store

from .conftest import make_due, ready_tasks, run_due_tasks

pytestmark = pytest.mark.django_db(transaction=True)


def notices(session_id):
    return [(n.message_id, n.content) for n in get_store().get_proactive(session_id)]


def test_a_reminder_fires_once_into_the_conversation_it_was_made_in(backend, alice):
    sessions.session_create(owner_id=alice.id, session_id="chat-1")
    schedule = schedule_create(
        owner_id=alice.id, session_id="chat-1", text="stretch", in_seconds=3600
    )
    run_due_tasks()
    assert notices("chat-1") == []  # not yet: its time is an hour ahead

    make_due(schedule)
    run_due_tasks()
    run_due_tasks()
    message_id = f"schedule:{schedule.id}:{schedule.next_run_at.isoformat()}"
    assert notices("chat-1") == [(message_id, "Reminder: stretch")]
    schedule.refresh_from_db()
    assert (schedule.state, schedule.next_run_at) == ("done", None)
    assert ready_tasks("fire_schedule") == []

    # The same run fired again (a duplicate task) changes nothing.
    assert schedule_fire(schedule_id=schedule.id, run_at=schedule.first_run_at) == "skipped"
    assert len(notices("chat-1")) == 1
    assert ScheduleRun.objects.count() == 1


def test_a_reminder_whose_session_is_gone_goes_to_the_latest_real_conversation(backend, alice):
    sessions.session_create(owner_id=alice.id, session_id="older")
    sessions.session_create(owner_id=alice.id, session_id="test-probe")
    # A sub-agent session is one a delegation spawned (the same rule as the sessions list).
    get_store().create(
        "agent_researcher__older", agent="researcher", owner_id=alice.id, spawned_by="older"
    )
    sessions.session_create(owner_id=alice.id, session_id="gone")
    schedule = schedule_create(owner_id=alice.id, session_id="gone", text="call mum", in_seconds=60)
    deletion.session_delete(session_id="gone", owner_id=alice.id)
    make_due(schedule)
    run_due_tasks()
    # Neither the test session nor the sub-agent session is chosen, though newer.
    assert [c for _, c in notices("older")] == ["Reminder: call mum"]
    assert notices("test-probe") == notices("agent_researcher__older") == []


def test_a_user_without_conversations_gets_a_new_one(backend, alice):
    schedule = schedule_create(owner_id=alice.id, text="water the plants", in_seconds=60)
    make_due(schedule)
    run_due_tasks()
    (meta,) = get_store().list(owner_id=alice.id)
    assert meta.title == "Reminders"
    assert [c for _, c in notices(meta.id)] == ["Reminder: water the plants"]


def test_test_traffic_stays_in_test_sessions(backend, alice):
    sessions.session_create(owner_id=alice.id, session_id="real-chat")
    sessions.session_create(owner_id=alice.id, session_id="test-kept")
    sessions.session_create(owner_id=alice.id, session_id="test-gone")
    kept = schedule_create(owner_id=alice.id, session_id="test-kept", text="a", in_seconds=60)
    gone = schedule_create(owner_id=alice.id, session_id="test-gone", text="b", in_seconds=60)
    deletion.session_delete(session_id="test-gone", owner_id=alice.id)
    make_due(kept)
    make_due(gone)
    run_due_tasks()
    assert [c for _, c in notices("test-kept")] == ["Reminder: a"]
    assert notices("real-chat") == []  # the dropped one never lands in a real conversation
    assert ScheduleRun.objects.get(schedule=gone).outcome == "dropped"


def test_a_repeating_schedule_missed_for_hours_fires_once_and_waits_for_the_next(backend, alice):
    sessions.session_create(owner_id=alice.id, session_id="chat-1")
    schedule = schedule_create(
        owner_id=alice.id, session_id="chat-1", text="drink water", every=1, unit="hours"
    )
    assert schedule.next_run_at - schedule.created_at == timedelta(hours=1)
    make_due(schedule, ago=timedelta(hours=5, minutes=30))  # no worker ran for 5.5 hours
    before = timezone.now()
    run_due_tasks()
    assert len(notices("chat-1")) == 1
    schedule.refresh_from_db()
    assert schedule.state == "active"
    # The next run continues the series after now: 30 minutes ahead, not five runs behind.
    assert before < schedule.next_run_at <= before + timedelta(minutes=31)
    (queued,) = ready_tasks("fire_schedule")
    assert str(queued.id) == schedule.task_id
    assert queued.run_after == schedule.next_run_at

    make_due(schedule)
    run_due_tasks()
    assert len(notices("chat-1")) == 2
    assert len({message_id for message_id, _ in notices("chat-1")}) == 2


def test_cancelling_removes_the_queued_run_and_a_late_fire_does_nothing(backend, alice):
    sessions.session_create(owner_id=alice.id, session_id="chat-1")
    schedule = schedule_create(
        owner_id=alice.id, session_id="chat-1", text="stretch", every=2, unit="minutes"
    )
    run_at = schedule.next_run_at
    assert len(ready_tasks("fire_schedule")) == 1
    cancelled = schedule_cancel(schedule_id=schedule.id, owner_id=alice.id)
    assert (cancelled.state, cancelled.next_run_at) == ("cancelled", None)
    assert ready_tasks("fire_schedule") == []
    assert schedule_fire(schedule_id=schedule.id, run_at=run_at) == "skipped"
    assert notices("chat-1") == []
    assert schedule_cancel(schedule_id=schedule.id, owner_id=alice.id).state == "cancelled"


def test_a_scheduled_prompt_runs_as_a_turn_and_its_answer_is_the_notice(backend, alice):
    sessions.session_create(owner_id=alice.id, session_id="chat-1")
    schedule = schedule_create(
        owner_id=alice.id, session_id="chat-1", kind="prompt", text="what is 6*7", in_seconds=30
    )
    make_due(schedule)
    run_due_tasks()
    assert [c for _, c in notices("chat-1")] == ["6*7 = 42."]
    # The scratch session of the sub-agent turn is gone with its memory.
    assert [m.id for m in get_store().list(owner_id=alice.id)] == ["chat-1"]
    assert get_store().get_messages("chat-1") == []


@pytest.mark.parametrize(
    "arguments, message",
    [
        ({"text": ""}, "needs a text"),
        ({"text": "x", "in_seconds": 10, "kind": "shout"}, "kind"),
        ({"text": "x"}, "either run_at or in_seconds"),
        ({"text": "x", "in_seconds": 10, "run_at": timezone.now()}, "either"),
        ({"text": "x", "run_at": timezone.now() - timedelta(hours=1)}, "in the past"),
        ({"text": "x", "in_seconds": 10, "every": 2, "unit": "weeks"}, "unit"),
        ({"text": "x", "in_seconds": 10, "every": 0, "unit": "hours"}, "whole number"),
        ({"text": "a\x00b", "in_seconds": 10}, "NUL"),
    ],
)
def test_bad_input_is_refused_and_changes_nothing(alice, arguments, message):
    with pytest.raises(ScheduleInvalid, match=message):
        schedule_create(owner_id=alice.id, **arguments)
    assert not Schedule.objects.exists()
    assert ready_tasks("fire_schedule") == []


def test_a_notice_never_exceeds_the_notice_limit(alice):
    sessions.session_create(owner_id=alice.id, session_id="chat-1")
    schedule = schedule_create(
        owner_id=alice.id, session_id="chat-1", text="x" * 20_000, in_seconds=60
    )
    make_due(schedule)
    run_due_tasks()
    ((_, content),) = notices("chat-1")
    assert len(content) == 20_000
    assert content.startswith("Reminder: xxx") and content.endswith("x…")
