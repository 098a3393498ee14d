"""Every finished turn becomes an episode with its thought log (docs/design.md §9)."""

import pytest

from memory_app.extraction import classify_task
from memory_app.models import Episode, ThoughtLog
from sessions_app.core import signals
from tests.builders import arithmetic_turn, play_turn

pytestmark = pytest.mark.django_db


def test_each_turn_leaves_an_episode_with_request_answer_tools_and_outcome(backend, alice):
    first = arithmetic_turn("s-ep", "17*3", "51", owner_id=alice.id, turn_id="t-a")
    play_turn("s-ep", "Hello there", "Hi! How can I help?", owner_id=alice.id, turn_id="t-b")

    episodes = list(Episode.objects.filter(session_id="s-ep").order_by("first_seq"))
    assert [e.turn_id for e in episodes] == ["t-a", "t-b"]
    maths, greeting = episodes
    assert maths.request == "What is 17*3?"
    assert maths.answer == "17*3 = 51"
    assert maths.tools_used == ["calculator"]
    assert maths.outcome == "completed"
    assert maths.task_kind == "arithmetic"
    assert maths.owner_id == alice.id
    assert (maths.first_seq, maths.last_seq) == (first[0].seq, first[-1].seq)
    assert not maths.consolidated
    assert greeting.task_kind == "conversation"
    assert greeting.tools_used == []
    assert greeting.first_seq == maths.last_seq + 1


def test_thought_log_keeps_the_reasoning_between_request_and_answer_in_order(backend):
    play_turn(
        "s-thoughts",
        "What time is it, and what is 6*7?",
        "It is noon and 6*7 = 42.",
        thought="I need the clock and the calculator.",
        tools=[
            ("current_time", {}, "2025-01-01T12:00:00Z"),
            ("calculator", {"expression": "6*7"}, "42"),
        ],
    )
    episode = Episode.objects.get(session_id="s-thoughts")
    steps = list(episode.thoughts.values_list("kind", "tool_name", "text"))
    assert steps == [
        ("thought", "", "I need the clock and the calculator."),
        ("tool_call", "current_time", "{}"),
        ("tool_call", "calculator", '{"expression": "6*7"}'),
        ("tool_result", "current_time", "2025-01-01T12:00:00Z"),
        ("tool_result", "calculator", "42"),
    ]
    assert episode.tools_used == ["current_time", "calculator"]
    # The first tool decides the kind: the clock was consulted first.
    assert episode.task_kind == "time"


def test_long_tool_results_are_kept_as_a_summary():
    play_turn("s-long", "Fetch it", "Done.", tools=[("web_fetch", {"url": "x"}, "y" * 5000)])
    result = ThoughtLog.objects.get(session_id="s-long", kind="tool_result")
    assert len(result.text) == 500
    assert result.text.endswith("…")


def test_a_failed_turn_is_an_episode_too_with_its_outcome():
    play_turn(
        "s-fail", "Wait 5 seconds", "", tools=[("wait", {"seconds": 5}, "")], status="aborted"
    )
    episode = Episode.objects.get(session_id="s-fail")
    assert episode.outcome == "aborted"
    assert episode.answer == ""
    assert episode.task_kind == "wait"


def test_the_same_turn_announced_twice_is_one_episode():
    records = play_turn("s-twice", "Hi", "Hello", turn_id="t-1")
    signals.turn_finished.send(
        sender=None,
        session_id="s-twice",
        owner_id=None,
        turn_id="t-1",
        status="completed",
        entries=records,
    )
    assert Episode.objects.filter(session_id="s-twice").count() == 1
    assert ThoughtLog.objects.filter(session_id="s-twice").count() == 0


@pytest.mark.parametrize(
    ("request_text", "tools", "kind"),
    [
        ("what is 12 + 30", [], "arithmetic"),
        ("please calculate the square root of 2", [], "arithmetic"),
        ("anything", ["calculator"], "arithmetic"),
        ("What time is it?", [], "time"),
        ("hm", ["current_time"], "time"),
        ("wait for 3 seconds", [], "wait"),
        ("remember my locker code", [], "memory"),
        ("x", ["remember"], "memory"),
        ("Tell me a joke", [], "conversation"),
    ],
)
def test_task_kinds_are_decided_by_tools_then_words(request_text, tools, kind):
    assert classify_task(request_text, tools) == kind
