"""Request replay (docs/design.md §20): for every step of a turn, `GET …/turns/{id}/requests/`
rebuilds the body the provider received — checked against what the local fake server of
each API actually received through the official SDKs, over a history with tool calls, a
model change from the other provider, a compaction and thinking."""

import json

import pytest

from sessions_app.runtime.turn.turns import turn_run
from sessions_app.services import sessions
from sessions_app.store import NewEntry, get_store
from sessions_app.store.request_headers import header_get
from tests.builders import assistant, token_client, user
from tests.fakes.llm_server import Reply, serving_both_sdks

from .conftest import assert_history_valid

pytestmark = pytest.mark.django_db(transaction=True)

MODELS = {"openai": "openai:gpt-4o", "anthropic": "anthropic:claude-haiku-4-5"}


@pytest.fixture
def server(settings):
    with serving_both_sdks(settings) as running:
        yield running


@pytest.fixture(params=["openai", "anthropic"])
def api_name(request):
    return request.param


def replayed(client, session_id: str, turn_ids: list[str]) -> list[dict]:
    bodies = []
    for turn_id in turn_ids:
        response = client.get(f"/api/sessions/{session_id}/turns/{turn_id}/requests/")
        assert response.status_code == 200, response.content
        bodies += [request["body"] for request in response.json()["requests"]]
    return bodies


def test_every_request_of_every_turn_is_rebuilt_exactly(backend, server, api_name, alice):
    other = "anthropic" if api_name == "openai" else "openai"
    session_id = get_store().create("test-replay", owner_id=alice.id).id
    turns = []

    def turn(text):
        result = turn_run(session_id=session_id, text=text, owner_id=alice.id)
        assert result.status == "completed", result.error
        turns.append(result.turn_id)

    # A first turn with a tool call, on the other provider.
    sessions.session_configure(session_id=session_id, owner_id=alice.id, model=MODELS[other])
    server.script(Reply(calls=[("calculator", {"expression": "2+3"})]), Reply(text="It is 5."))
    turn("what is 2+3?")
    # Then this provider, a plain turn, and a compaction of the turns before the last.
    sessions.session_configure(session_id=session_id, owner_id=alice.id, model=MODELS[api_name])
    server.script(Reply(text="Hello Ada."))
    turn("I am Ada")
    compaction = sessions.session_compact(session_id=session_id, owner_id=alice.id)
    # A turn with two calls side by side after the compaction, thinking.
    sessions.session_configure(session_id=session_id, owner_id=alice.id, thinking="medium")
    server.script(
        Reply(calls=[("calculator", {"expression": "6*7"}), ("clock", {})]),
        Reply(text="42, and the time."),
    )
    turn("6*7 and the time?")

    assert server.refusals == []
    assert len(server.requests) == 5
    sent_after_compaction = json.dumps(server.requests[-1])
    assert compaction.data["summary"][:40] in sent_after_compaction
    # The first turn's message itself (a JSON string of its own) is no longer sent.
    assert '"what is 2+3?"' not in sent_after_compaction
    thinking_sent = server.requests[-1].get("reasoning_effort") or server.requests[-1]["thinking"]
    assert thinking_sent in ("medium", {"type": "enabled", "budget_tokens": 4096})
    if api_name == "anthropic":
        # The signed thinking block went back first, before the tool use it led to.
        assert server.requests[-1]["messages"][-2]["content"][0]["type"] == "thinking"
    rebuilt = replayed(token_client(alice), session_id, turns)
    # Equal as JSON, request by request: model, system, messages, tools, parameters.
    assert rebuilt == server.requests
    assert_history_valid(session_id)


def test_turns_with_the_same_tools_store_their_header_once(backend, alice):
    session_id = get_store().create("test-headers", owner_id=alice.id).id
    first = turn_run(session_id=session_id, text="hello", owner_id=alice.id)
    second = turn_run(session_id=session_id, text="hello again", owner_id=alice.id)
    starts = [result.entries[0] for result in (first, second)]
    assert starts[0].data["header"] == starts[1].data["header"]
    header = header_get(starts[0].data["header"])
    assert {"system", "tools", "parameters", "thinking"} <= header.keys()
    assert "calculator" in [tool["name"] for tool in header["tools"]]
    # turn_start names the header instead of copying the schemas into every turn.
    assert "tools" not in starts[1].data and starts[1].data["model"] == "offline"


def test_replay_of_another_users_turn_is_not_found(backend, alice, bob):
    session_id = get_store().create("test-mine", owner_id=alice.id).id
    result = turn_run(session_id=session_id, text="hello", owner_id=alice.id)
    path = f"/api/sessions/{session_id}/turns/{result.turn_id}/requests/"
    assert token_client(bob).get(path).status_code == 404
    offline = token_client(alice).get(path).json()
    assert offline["model"] == "offline"
    assert offline["requests"][0]["body"]["messages"][-1]["content"][0]["text"] == "hello"


def test_a_turn_stored_before_headers_had_rows_is_replayed_from_its_own_copy(backend, alice):
    """Such a turn_start carried the prompt, the tools and the parameters itself."""
    session_id = get_store().create("test-old", owner_id=alice.id).id
    calculator = {"name": "calculator", "description": "Math.", "parameters": {"type": "object"}}
    start = NewEntry(
        kind="turn_start",
        turn_id="t-old",
        data={
            "model": "offline",
            "parameters": {},
            "agent": "jarvis",
            "system_prompt": "You were Jarvis then.",
            "tools": [calculator],
        },
    )
    get_store().append(session_id, [start, user("hi", "t-old"), assistant("Hello.", turn="t-old")])
    answer = token_client(alice).get(f"/api/sessions/{session_id}/turns/t-old/requests/")
    (request,) = answer.json()["requests"]
    assert request["body"]["system"] == "You were Jarvis then."
    assert request["body"]["tools"] == [calculator]
    assert request["body"]["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "hi"}]}
    ]
