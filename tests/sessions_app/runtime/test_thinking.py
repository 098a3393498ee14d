"""Thinking (docs/design.md §20): the session's level reaches both providers through their
official SDKs, Anthropic's signed thinking blocks are kept and sent back before the tool use
they led to, the validators know Anthropic's rule, and the offline model ignores it all."""

import json

import pytest

from sessions_app.runtime.context.history import (
    HistoryInvalid,
    project_anthropic,
    project_openai,
    validate_anthropic,
)
from sessions_app.runtime.turn.turns import turn_run
from sessions_app.selectors.turns import request_header_of
from sessions_app.services import sessions
from sessions_app.store import NewEntry, get_store
from tests.builders import assistant, records, result, user
from tests.fakes.llm_server import Reply, serving_both_sdks

from .conftest import assert_history_valid

pytestmark = pytest.mark.django_db(transaction=True)

SIGNED = {"type": "thinking", "thinking": "2+3 is simple.", "signature": "sig_abc"}


@pytest.fixture
def server(settings):
    with serving_both_sdks(settings) as running:
        yield running


def session_thinking(alice, model: str, level: str) -> str:
    session_id = get_store().create("test-thinking", owner_id=alice.id).id
    sessions.session_configure(session_id=session_id, owner_id=alice.id, model=model)
    sessions.session_configure(session_id=session_id, owner_id=alice.id, thinking=level)
    return session_id


def tool_step_history_entries():
    """A question, then an answer that called a tool, then its result: a turn cut off there."""
    call = {"id": "toolu_9", "name": "calculator", "arguments": '{"expression": "2+3"}'}
    return [
        user("what is 2+3?"),
        assistant(calls=[call]),
        result("toolu_9", "5", name="calculator"),
    ]


def tool_step_history(reasoning=None):
    """A question, an answer that calls a tool (with its reasoning, if given), its result."""
    call = {"id": "toolu_1", "name": "calculator", "arguments": '{"expression": "2+3"}'}
    answer = assistant(calls=[call])
    if reasoning is not None:
        answer = NewEntry(
            role="assistant", tool_calls=[call], data={"reasoning": reasoning}, turn_id="t1"
        )
    return records([user("what is 2+3?"), answer, result("toolu_1", "5", name="calculator")])


def test_the_validator_knows_anthropics_rule_on_thinking_blocks():
    without = project_anthropic(tool_step_history(), "system")[1]
    validate_anthropic(without)  # thinking off: no rule
    with pytest.raises(HistoryInvalid, match="must start with a thinking block"):
        validate_anthropic(without, thinking=True)
    kept = project_anthropic(tool_step_history([SIGNED]), "system", thinking=True)[1]
    assert kept[1]["content"][0] == SIGNED and kept[1]["content"][1]["type"] == "tool_use"
    validate_anthropic(kept, thinking=True)
    unsigned = project_anthropic(
        tool_step_history([{**SIGNED, "signature": ""}]), "system", thinking=True
    )[1]
    with pytest.raises(HistoryInvalid, match="signature"):
        validate_anthropic(unsigned, thinking=True)
    # Reasoning is Anthropic's own: never in OpenAI's shape, nor sent with thinking off.
    assert "sig_abc" not in json.dumps(project_openai(tool_step_history([SIGNED]), "system"))
    assert "sig_abc" not in json.dumps(project_anthropic(tool_step_history([SIGNED]), "system"))


def test_anthropic_thinking_blocks_are_kept_and_sent_back_before_the_tool_use(
    backend, server, alice
):
    session_id = session_thinking(alice, "anthropic:claude-haiku-4-5", "high")
    server.script(Reply(calls=[("calculator", {"expression": "2+3"})]), Reply(text="It is 5."))
    turn = turn_run(session_id=session_id, text="what is 2+3?", owner_id=alice.id)

    assert turn.status == "completed", turn.error
    assert server.refusals == []
    first, second = server.requests
    assert first["thinking"] == {"type": "enabled", "budget_tokens": 16384}
    assert first["max_tokens"] > first["thinking"]["budget_tokens"]
    calling = next(e for e in turn.entries if e.tool_calls)
    (stored,) = calling.data["reasoning"]
    assert stored["type"] == "thinking" and stored["signature"].startswith("sig_")
    # The tool use goes back with the signed thinking block that led to it, first.
    sent_back = second["messages"][-2]["content"]
    assert sent_back[0] == stored and sent_back[1]["type"] == "tool_use"
    assert request_header_of(turn.entries[0])["thinking"] == "high"
    assert_history_valid(session_id)


def test_openai_gets_the_reasoning_effort_and_nothing_when_off(backend, server, alice):
    session_id = session_thinking(alice, "openai:o4-mini", "low")
    turn_run(session_id=session_id, text="hello", owner_id=alice.id)
    sessions.session_configure(session_id=session_id, owner_id=alice.id, thinking="off")
    turn_run(session_id=session_id, text="hello again", owner_id=alice.id)
    assert server.requests[0]["reasoning_effort"] == "low"
    assert "reasoning_effort" not in server.requests[1]
    assert server.refusals == []


def test_thinking_turned_on_after_a_tool_use_without_it_still_gets_an_answer(
    backend, server, alice
):
    """The previous turn stopped right after its tool results (no thinking then); the new
    request continues that tool use, which Anthropic refuses with thinking on without the
    block — so that one request goes without thinking rather than fail."""
    session_id = session_thinking(alice, "anthropic:claude-haiku-4-5", "off")
    get_store().append(session_id, tool_step_history_entries())
    sessions.session_configure(session_id=session_id, owner_id=alice.id, thinking="medium")
    turn = turn_run(session_id=session_id, text="and 3+4?", owner_id=alice.id)
    assert turn.status == "completed", turn.error
    assert server.refusals == []
    assert "thinking" not in server.requests[0]


def test_the_offline_model_ignores_thinking(backend, alice):
    session_id = get_store().create("test-offline-thinking", owner_id=alice.id).id
    sessions.session_configure(session_id=session_id, owner_id=alice.id, thinking="high")
    turn = turn_run(session_id=session_id, text="what is 6*7?", owner_id=alice.id)
    assert turn.status == "completed"
    header = request_header_of(turn.entries[0])
    assert header["thinking"] == "high" and header["parameters"] == {}
