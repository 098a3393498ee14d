"""The offline model and the tools: what a user of the default setup sees."""

import threading

import pytest

from sessions_app.runtime.providers.offline import OfflineProvider
from sessions_app.runtime.tools.builtin import calculate
from sessions_app.runtime.tools.registry import TOOLS
from sessions_app.runtime.turn.turns import turn_run
from tests.builders import records, turn_start, user

from .conftest import assert_history_valid

SPECS = [tool.spec() for tool in TOOLS.values()]


def complete(history, **kwargs):
    deltas = []
    reply = OfflineProvider().complete(
        entries=records(history),
        system_prompt="system",
        tools=kwargs.get("tools", SPECS),
        on_delta=deltas.append,
        abort=kwargs.get("abort", threading.Event()),
    )
    return reply, deltas


def test_two_requests_become_two_calls_in_one_step_in_reading_order():
    reply, deltas = complete([turn_start(), user("what is 2+3 and what time is it")])
    assert [(c["name"], c["arguments"]) for c in reply.tool_calls] == [
        ("calculator", '{"expression": "2+3"}'),
        ("clock", "{}"),
    ]
    assert reply.text == "" and deltas == []
    assert len({c["id"] for c in reply.tool_calls}) == 2


def test_answers_stream_word_by_word_with_usage_estimated_from_characters():
    first, deltas = complete([user("good morning")])
    again, _ = complete([user("good morning")])
    assert first.text == again.text, "deterministic"
    assert "".join(deltas) == first.text and len(deltas) == len(first.text.split(" "))
    assert first.usage["output_tokens"] == -(-len(first.text) // 4)
    assert first.usage["input_tokens"] > 0


def test_only_offered_tools_are_called():
    reply, _ = complete([user("what is 2+3")], tools=[])
    assert reply.tool_calls == [] and "2+3" in reply.text


def test_an_abort_while_streaming_stops_the_answer():
    abort = threading.Event()
    abort.set()
    reply, deltas = complete([user("hello")], abort=abort)
    assert reply.stopped and deltas == []


@pytest.mark.parametrize(
    "expression, value",
    [("2+3", "5"), ("2^10", "1024"), ("(1.5+2)*2", "7"), ("7/2", "3.5"), ("-3 * -3", "9")],
)
def test_calculator(expression, value):
    assert calculate(expression) == value


@pytest.mark.parametrize(
    "expression",
    ["9**9999", "(((10**100)**100)**100)**20", "10.0**400", "__import__('os')", "1/0", "2+"],
)
def test_calculator_refuses_what_it_must_not_evaluate(expression):
    with pytest.raises(ValueError):
        calculate(expression)


@pytest.mark.django_db(transaction=True)
def test_remember_then_recall_across_turns(session):
    noted = turn_run(session_id=session, text="Remember that my favourite color is teal.")
    assert [e.name for e in noted.entries if e.role == "tool"] == ["remember"]
    assert "Noted: your favourite color is teal." in noted.entries[-2].content
    recalled = turn_run(session_id=session, text="What is my favourite color?")
    assert recalled.entries[-2].content == "Your favourite color is teal."
    unknown = turn_run(session_id=session, text="what is my shoe size?")
    assert unknown.entries[-2].content == "I don't know your shoe size yet."
    assert_history_valid(session)
