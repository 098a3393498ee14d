"""Projection and validation (pure): what a model receives is always something it accepts."""

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sessions_app.runtime.context.history import (
    CRASH_RESULT_TEXT,
    MISSING_RESULT_TEXT,
    HistoryInvalid,
    calls_made,
    project_anthropic,
    project_openai,
    repair_entries,
    validate_anthropic,
    validate_openai,
)
from sessions_app.services.transfer import repair_history
from sessions_app.store import NewEntry
from tests.builders import assistant, call, records, result, turn_end, turn_start, user

SYSTEM = "You are Jarvis."


def both(history):
    messages = project_openai(history, SYSTEM)
    validate_openai(messages)
    system, anthropic = project_anthropic(history, SYSTEM)
    validate_anthropic(anthropic)
    return messages, system, anthropic


def test_plain_conversation_projects_to_both_formats():
    history = records(
        [turn_start(), user("hi"), assistant("hello"), turn_end(), NewEntry(kind="model_change")]
    )
    messages, system, anthropic = both(history)
    assert messages == [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "hello"},
    ]
    assert system == SYSTEM
    assert anthropic == [
        {"role": "user", "content": [{"type": "text", "text": "hi"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "hello"}]},
    ]


def test_parallel_calls_become_contiguous_results_and_one_anthropic_user_message():
    history = records(
        [
            turn_start(),
            user("what is 2+3 and what time is it"),
            assistant("", [call("a"), call("b", "clock", "{}")]),
            result("a", "5"),
            result("b", "12:00", name="clock"),
            assistant("5, and it is noon"),
            turn_end(),
            user("thanks"),
        ]
    )
    messages, _, anthropic = both(history)
    assert [m["role"] for m in messages] == [
        "system",
        "user",
        "assistant",
        "tool",
        "tool",
        "assistant",
        "user",
    ]
    assert messages[2]["tool_calls"][1]["function"] == {"name": "clock", "arguments": "{}"}
    assert [m["role"] for m in anthropic] == ["user", "assistant", "user", "assistant", "user"]
    assert anthropic[1]["content"] == [
        {"type": "tool_use", "id": "a", "name": "calculator", "input": {"expression": "2+2"}},
        {"type": "tool_use", "id": "b", "name": "clock", "input": {}},
    ]
    assert [b["tool_use_id"] for b in anthropic[2]["content"]] == ["a", "b"]


def test_user_text_after_results_is_merged_behind_the_results():
    # An aborted turn ends right after its results; the next turn's user message follows.
    history = records(
        [
            user("wait 5"),
            assistant("", [call("a", "wait", '{"seconds": 5}')]),
            result("a", "aborted", name="wait", is_error=True),
            turn_end(status="aborted"),
            user("never mind"),
        ]
    )
    _, _, anthropic = both(history)
    assert [b["type"] for b in anthropic[2]["content"]] == ["tool_result", "text"]
    assert anthropic[2]["content"][0]["is_error"] is True


def test_compaction_keeps_summary_then_entries_from_first_kept_seq():
    history = records(
        [
            user("my name is Ada"),  # 1
            assistant("hi Ada"),  # 2
            user("what is 2+2"),  # 3
            assistant("", [call("a")]),  # 4
            result("a", "4"),  # 5
            assistant("4"),  # 6
        ]
    )
    history += records(
        [NewEntry(kind="compaction", data={"summary": "User is Ada.", "first_kept_seq": 5})],
        start=7,
    )
    messages, _, anthropic = both(history)
    # first_kept_seq points at a result: the call that produced it is kept with it.
    assert messages[1]["content"].endswith("User is Ada.")
    assert [m["role"] for m in messages[2:]] == ["assistant", "tool", "assistant"]
    assert "my name is Ada" not in json.dumps(messages)
    assert anthropic[0]["role"] == "user"


def test_legacy_call_without_result_gets_a_synthesized_error_result():
    history = records([user("2+2?"), assistant("", [call("a")]), user("hello?")])
    messages, _, anthropic = both(history)
    assert messages[3] == {"role": "tool", "tool_call_id": "a", "content": MISSING_RESULT_TEXT}
    assert anthropic[2]["content"][0]["is_error"] is True


def test_orphan_results_and_duplicate_ids_are_made_valid():
    history = records(
        [
            result("ghost", "boo"),
            user("hi"),
            assistant("", [call("a")]),
            result("a", "4"),
            result("a", "4 again"),
            assistant("", [call("a")]),
            result("a", "5"),
            assistant("done"),
        ]
    )
    messages, _, _ = both(history)
    ids = [c["id"] for m in messages for c in m.get("tool_calls", [])]
    assert len(set(ids)) == 2
    assert "boo" not in json.dumps(messages)


@pytest.mark.parametrize(
    "messages, fragment",
    [
        (
            [
                {"role": "system", "content": "s"},
                {"role": "user", "content": "u"},
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "c1",
                            "type": "function",
                            "function": {"name": "x", "arguments": "{}"},
                        }
                    ],
                },
                {"role": "user", "content": "u"},
            ],
            "messages.[3].role: An assistant message with 'tool_calls' must be followed by tool "
            "messages responding to each 'tool_call_id'. The following tool_call_ids did not "
            "have response messages: c1",
        ),
        (
            [
                {"role": "system", "content": "s"},
                {"role": "tool", "tool_call_id": "c1", "content": "r"},
            ],
            "messages.[1].role",
        ),
        ([{"role": "system", "content": "s"}, {"role": "user", "content": ""}], "messages.[1]"),
    ],
)
def test_openai_validator_names_the_offending_index(messages, fragment):
    with pytest.raises(HistoryInvalid, match=None) as error:
        validate_openai(messages)
    assert fragment in str(error.value)


@pytest.mark.parametrize(
    "messages, fragment",
    [
        (
            [{"role": "assistant", "content": "hi"}],
            'messages: first message must use the "user" role (messages.0)',
        ),
        (
            [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}],
            "messages.1: roles must alternate",
        ),
        (
            [
                {"role": "user", "content": "a"},
                {
                    "role": "assistant",
                    "content": [{"type": "tool_use", "id": "t1", "name": "x", "input": {}}],
                },
                {"role": "user", "content": "b"},
            ],
            "messages.1: `tool_use` ids were found without `tool_result` blocks immediately "
            "after: t1. Each `tool_use` block must have a corresponding `tool_result` block in "
            "the next message.",
        ),
        (
            [
                {
                    "role": "user",
                    "content": [{"type": "tool_result", "tool_use_id": "t9", "content": "x"}],
                }
            ],
            "messages.0.content.0: unexpected `tool_use_id`",
        ),
        ([{"role": "user", "content": []}], "messages.0: all messages must have non-empty content"),
    ],
)
def test_anthropic_validator_names_the_offending_index(messages, fragment):
    with pytest.raises(HistoryInvalid) as error:
        validate_anthropic(messages)
    assert fragment in str(error.value)


# --- property: any history, after repair, projects to something both providers accept -----

words = st.text(alphabet="abc 12+", min_size=0, max_size=8)


@st.composite
def histories(draw):
    """Turns that complete, abort, hit errors or stop dead, with parallel calls and noise."""
    entries: list[NewEntry] = []
    next_id = 0
    for turn_index in range(draw(st.integers(0, 4))):
        turn = f"t{turn_index}"
        entries += [turn_start(turn), user(draw(words), turn)]
        for _ in range(draw(st.integers(0, 3))):
            calls = []
            for _ in range(draw(st.integers(0, 3))):
                next_id += 1
                calls.append(call(draw(st.sampled_from([f"c{next_id}", "dup"])), "calculator"))
            entries.append(assistant(draw(words), calls, turn))
            answered = draw(st.permutations(calls)) if calls else []
            keep = draw(st.integers(0, len(answered)))
            entries += [result(c["id"], draw(words), turn=turn) for c in answered[:keep]]
            if draw(st.booleans()) and keep < len(calls):
                break  # the process died mid-step
        if draw(st.integers(0, 3)):
            entries.append(turn_end(turn, draw(st.sampled_from(["completed", "aborted", "error"]))))
        if draw(st.integers(0, 5)) == 0:
            entries.append(NewEntry(kind=draw(st.sampled_from(["model_change", "weird_kind"]))))
        if draw(st.integers(0, 6)) == 0:
            entries.append(result("orphan", "stray"))
    history = records(entries)
    if history and draw(st.booleans()):
        kept = draw(st.integers(1, history[-1].seq + 1))
        history += records(
            [NewEntry(kind="compaction", data={"summary": "earlier", "first_kept_seq": kept})],
            start=history[-1].seq + 1,
        )
    return history


@settings(max_examples=300, deadline=None)
@given(histories())
def test_any_history_after_repair_validates_in_both_formats(history):
    repairs = repair_entries(history)
    start = history[-1].seq + 1 if history else 1
    repaired = history + records(repairs, start=start)
    assert repair_entries(repaired) == []  # idempotent
    # What the model sees is the repaired history plus the next turn's user message.
    both(repaired + records([user("next")], start=start + len(repairs)))


@settings(max_examples=200, deadline=None)
@given(histories())
def test_an_imports_repair_leaves_nothing_for_the_turn_or_the_projection_to_pair(history):
    """One reading of the pairing: once an import's repair has answered every call, the turn's
    repair finds nothing to add and the projection synthesizes no result."""
    entries = [
        NewEntry(**{name: getattr(r, name) for name in NewEntry.__dataclass_fields__})
        for r in history
    ]
    repaired = records(repair_history(entries).entries)

    assert [made.unanswered() for made in calls_made(repaired) if made.unanswered()] == []
    assert repair_entries(repaired) == []
    messages, _, anthropic = both(repaired + records([user("next")], start=len(repaired) + 1))
    assert MISSING_RESULT_TEXT not in json.dumps([messages, anthropic])


@settings(max_examples=300, deadline=None)
@given(histories())
def test_even_unrepaired_histories_project_to_something_valid(history):
    start = history[-1].seq + 1 if history else 1
    both(history + records([user("next")], start=start))


def test_repair_answers_every_dangling_call_in_order_then_closes_the_turn():
    history = records(
        [turn_start(), user("x"), assistant("", [call("a"), call("b"), call("c")]), result("b")]
    )
    repairs = repair_entries(history)
    assert [(r.tool_call_id, r.content, r.is_error) for r in repairs[:-1]] == [
        ("a", CRASH_RESULT_TEXT, True),
        ("c", CRASH_RESULT_TEXT, True),
    ]
    assert repairs[-1].kind == "turn_end" and repairs[-1].data["status"] == "interrupted"
