"""The offline model understands reminders, scheduled prompts and their cancellation; the
`schedule` / `unschedule` tools act for the conversation's owner."""

from datetime import timedelta

import pytest

from notices_app.models import Schedule
from sessions_app.runtime.providers.offline import _intents
from sessions_app.runtime.turn.turns import turn_run
from sessions_app.services import sessions
from sessions_app.store import get_store

OFFERED = {"schedule", "unschedule", "calculator", "clock", "wait", "remember", "recall"}


@pytest.mark.parametrize(
    "text, arguments",
    [
        (
            "remind me in 10 seconds to stretch",
            {"text": "stretch", "kind": "reminder", "in_seconds": 10.0},
        ),
        (
            "Remind me to call Mum in 2 hours.",
            {"text": "call Mum", "kind": "reminder", "in_seconds": 7200.0},
        ),
        (
            "in 30 seconds, what is 6*7",
            {"text": "what is 6*7", "kind": "prompt", "in_seconds": 30.0},
        ),
        (
            "every 2 hours remind me to drink water",
            {"text": "drink water", "kind": "reminder", "every": 2, "unit": "hours"},
        ),
        (
            "remind me every day to water the plants",
            {"text": "water the plants", "kind": "reminder", "every": 1, "unit": "days"},
        ),
    ],
)
def test_the_offline_model_schedules(text, arguments):
    assert [(name, args) for _, name, args in _intents(text, OFFERED)] == [("schedule", arguments)]


@pytest.mark.parametrize(
    "text, arguments",
    [
        ("cancel reminder 12", {"id": 12}),
        ("cancel the reminder to drink water", {"text": "drink water"}),
        ("stop reminding me to drink water!", {"text": "drink water"}),
        ("cancel all my reminders", {"all": True}),
    ],
)
def test_the_offline_model_cancels(text, arguments):
    assert [(name, args) for _, name, args in _intents(text, OFFERED)] == [
        ("unschedule", arguments)
    ]


@pytest.mark.django_db(transaction=True)
def test_a_turn_schedules_and_cancels_for_the_sessions_owner(backend, alice):
    sessions.session_create(owner_id=alice.id, session_id="chat-1")
    result = turn_run(session_id="chat-1", text="every 2 hours remind me to drink water")
    assert result.status == "completed"
    schedule = Schedule.objects.get()
    assert (schedule.owner_id, schedule.session_id, schedule.text) == (
        alice.id,
        "chat-1",
        "drink water",
    )
    assert (schedule.repeat_every, schedule.repeat_unit) == (2, "hours")
    assert schedule.next_run_at - schedule.created_at == timedelta(hours=2)
    answer = result.entries[-2].content
    assert answer.startswith(f"OK, scheduled #{schedule.id} remind you: drink water at ")
    assert answer.endswith(", every 2 hours.")

    turn_run(session_id="chat-1", text="in 30 seconds, what is 6*7")
    prompt = Schedule.objects.get(kind="prompt")
    assert prompt.text == "what is 6*7"

    result = turn_run(session_id="chat-1", text="cancel all my reminders")
    assert sorted(Schedule.objects.values_list("state", flat=True)) == ["cancelled"] * 2
    assert result.entries[-2].content.startswith("Done: cancelled #")

    result = turn_run(session_id="chat-1", text="cancel reminder 999")
    tool_result = next(e for e in result.entries if e.role == "tool")
    assert tool_result.is_error and "there is no schedule #999" in tool_result.content


@pytest.mark.django_db(transaction=True)
def test_a_session_without_owner_cannot_schedule(backend):
    get_store().create("system-chat")
    result = turn_run(session_id="system-chat", text="remind me in 10 seconds to stretch")
    tool_result = next(e for e in result.entries if e.role == "tool")
    assert tool_result.is_error and "belong to a user" in tool_result.content
    assert not Schedule.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_the_schedule_tool_takes_numbers_a_model_sends_as_text(alice):
    import asyncio
    import json

    from sessions_app.runtime.tools.base import ToolContext
    from sessions_app.runtime.tools.registry import TOOLS, tool_run

    sessions.session_create(owner_id=alice.id, session_id="chat-1")
    context = ToolContext(session_id="chat-1")

    def call(arguments):
        return asyncio.run(
            tool_run(
                call={"id": "c1", "name": "schedule", "arguments": json.dumps(arguments)},
                context=context,
                tools=TOOLS,
            )
        )

    text, is_error = call({"text": "stretch", "in_seconds": "10", "every": 2.0, "unit": "hours"})
    assert not is_error, text
    assert Schedule.objects.get().repeat_every == 2
    text, is_error = call({"text": "stretch", "every": 2.5, "unit": "hours"})
    assert is_error and "every is a whole number" in text
    text, is_error = call({"text": "stretch", "in_seconds": "soon"})
    assert is_error and "in_seconds is a number" in text
    assert Schedule.objects.count() == 1
