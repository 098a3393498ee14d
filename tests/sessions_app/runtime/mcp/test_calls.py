"""Tools of a real MCP server (tests/fakes/mcp_server.py, written with the `mcp` SDK) called
in turns through the offline model's `call <tool> <json>`, over stdio and streamable HTTP, on
each store backend (docs/design.md §31)."""

import json
import os
import signal
import stat
import sys
import threading
import time

import pytest
from django.db import connections

from sessions_app.runtime.providers.anthropic import AnthropicProvider
from sessions_app.runtime.providers.openai import OpenAIProvider
from sessions_app.runtime.turn.approvals import DENIED_TEXT
from sessions_app.runtime.turn.turns import turn_abort, turn_run
from sessions_app.services import approvals
from sessions_app.store import get_store
from tests.fakes.llm_server import FakeLLMServer, Reply
from tests.fakes.mcp_servers import SERVER_SCRIPT
from tests.helpers import GUARD_SEC, eventually

from ..conftest import assert_history_valid

pytestmark = pytest.mark.django_db(transaction=True)


def tool_entries(result):
    return [entry for entry in result.entries if entry.role == "tool"]


def run(session, alice, text):
    return turn_run(session_id=session, owner_id=alice.id, text=text, provider="offline")


class TurnInThread:
    """A turn run by another thread, like a worker's; `asked` is set by approval_request."""

    def __init__(self, session_id: str, owner_id: int, text: str):
        self.events: list[dict] = []
        self.asked = threading.Event()
        self.result = None
        self.ended_at = 0.0
        self.thread = threading.Thread(target=self._run, args=(session_id, owner_id, text))
        self.thread.start()

    def _on_event(self, event):
        self.events.append(event)
        if event["type"] == "approval_request":
            self.asked.set()

    def _run(self, session_id, owner_id, text):
        try:
            self.result = turn_run(
                session_id=session_id,
                text=text,
                owner_id=owner_id,
                on_event=self._on_event,
                provider="offline",
            )
            self.ended_at = time.monotonic()
        finally:
            connections.close_all()

    def request(self) -> dict:
        assert self.asked.wait(GUARD_SEC), "no approval_request"
        return next(e for e in self.events if e["type"] == "approval_request")

    def finish(self):
        self.thread.join(GUARD_SEC)
        assert not self.thread.is_alive()
        return self.result


def test_a_trusted_tool_runs_and_its_result_is_the_answer(serve_mcp, session, alice):
    serve_mcp(trusted_tools=["add"])
    result = run(session, alice, 'call mcp__fake__add {"a": 2, "b": 3}')
    assert result.status == "completed"
    [entry] = tool_entries(result)
    assert (entry.name, entry.content, entry.is_error) == ("mcp__fake__add", "5", False)
    assert "5" in result.entries[-2].content
    assert_history_valid(session)


def test_an_untrusted_tool_waits_for_approval_and_a_denial_is_its_result(
    serve_mcp, session, alice, mcp_dir
):
    serve_mcp(trusted_tools=["add"])
    turn = TurnInThread(session, alice.id, 'call mcp__fake__write_note {"text": "buy milk"}')
    request = turn.request()
    assert (request["tool"], request["arguments"]) == (
        "mcp__fake__write_note",
        {"text": "buy milk"},
    )
    approvals.approval_decide(
        session_id=session, owner_id=alice.id, call_id=request["call_id"], allow=False
    )
    result = turn.finish()
    assert result.status == "completed"
    [entry] = tool_entries(result)
    assert (entry.content, entry.is_error) == (DENIED_TEXT, True)
    assert not (mcp_dir / "notes.txt").exists(), "a denied call never reaches the server"

    turn = TurnInThread(session, alice.id, 'call mcp__fake__write_note {"text": "buy eggs"}')
    approvals.approval_decide(
        session_id=session, owner_id=alice.id, call_id=turn.request()["call_id"], allow=True
    )
    [entry] = tool_entries(turn.finish())
    assert (entry.content, entry.is_error) == ("noted: buy eggs", False)
    assert (mcp_dir / "notes.txt").read_text() == "buy eggs\n"
    assert_history_valid(session)


def test_an_image_is_kept_as_a_file_of_the_session(serve_mcp, session, alice, api):
    serve_mcp(trusted_tools=["red_square"])
    result = run(session, alice, "call mcp__fake__red_square {}")
    [entry] = tool_entries(result)
    assert not entry.is_error
    [image] = entry.data["files"]
    assert (image["mime"], image["width"], image["height"]) == ("image/png", 24, 16)
    assert "[image: fake-red_square-1.png, 24×16]" in entry.content
    response = api.get(f"/api/sessions/{session}/files/{image['id']}/")
    assert response.status_code == 200
    assert b"".join(response.streaming_content).startswith(b"\x89PNG")
    # The page reads the conversation through the same entries.
    shown = api.get(f"/api/sessions/{session}/entries/?after_seq=0").json()
    tool = next(e for e in shown["entries"] if e["role"] == "tool")
    assert tool["data"]["files"][0]["id"] == image["id"]
    assert_history_valid(session)


def test_a_tool_error_is_an_error_result(serve_mcp, session, alice):
    serve_mcp(trusted_tools=["broken"])
    [entry] = tool_entries(run(session, alice, "call mcp__fake__broken {}"))
    assert entry.is_error and "broken" in entry.content


def test_a_call_past_timeout_sec_is_an_error_and_the_turn_completes(
    serve_mcp, session, alice, mcp_dir
):
    serve_mcp(trusted_tools=["slow"], timeout_sec=1)
    result = run(session, alice, 'call mcp__fake__slow {"seconds": 120}')
    assert result.status == "completed"
    [entry] = tool_entries(result)
    assert entry.is_error
    assert "did not answer within 1 seconds (timeout_sec)" in entry.content
    # The SDK told the server the call was abandoned.
    eventually(lambda: (mcp_dir / "cancelled").exists(), what="the server heard the cancel")
    assert_history_valid(session)


def test_stop_during_a_slow_tool_aborts_the_turn_at_once(serve_mcp, session, alice, mcp_dir):
    serve_mcp(trusted_tools=["slow"])
    turn = TurnInThread(session, alice.id, 'call mcp__fake__slow {"seconds": 120}')
    eventually(lambda: (mcp_dir / "slow_started").exists(), what="the call reached the server")
    stopped_at = time.monotonic()
    assert turn_abort(session_id=session)
    result = turn.finish()
    assert result.status == "aborted"
    assert turn.ended_at - stopped_at < 1.0
    [entry] = tool_entries(result)
    assert entry.is_error and "stopped" in entry.content
    eventually(lambda: (mcp_dir / "cancelled").exists(), what="the server heard the cancel")
    assert_history_valid(session)


@pytest.mark.parametrize("transport", ["stdio"])
def test_a_server_killed_between_two_calls_is_started_again(serve_mcp, session, alice):
    serve_mcp(trusted_tools=["add", "pid"])
    [first] = tool_entries(run(session, alice, "call mcp__fake__pid {}"))
    os.kill(int(first.content), signal.SIGKILL)
    [entry] = tool_entries(run(session, alice, 'call mcp__fake__add {"a": 2, "b": 3}'))
    assert (entry.content, entry.is_error) == ("5", False)
    [second] = tool_entries(run(session, alice, "call mcp__fake__pid {}"))
    assert second.content != first.content
    assert_history_valid(session)


BOTH = 'call mcp__fake__add {"a": 2, "b": 3}\ncall calculator {"expression": "6*7"}'


@pytest.mark.parametrize("transport", ["http"])
def test_a_server_that_went_away_gives_a_clear_error_and_built_in_tools_still_run(
    serve_mcp, session, alice
):
    server = serve_mcp(trusted_tools=["add"])
    run(session, alice, 'call mcp__fake__add {"a": 1, "b": 1}')  # listed, then gone
    server.stop()
    result = run(session, alice, BOTH)
    assert result.status == "completed"
    added, calculated = tool_entries(result)
    assert added.is_error
    assert "MCP server 'fake' cannot be reached" in added.content
    assert (calculated.content, calculated.is_error) == ("42", False)
    assert_history_valid(session)


@pytest.mark.parametrize("transport", ["stdio"])
def test_a_server_that_cannot_start_gives_a_clear_error_and_built_in_tools_still_run(
    serve_mcp, session, alice, tmp_path
):
    launcher = tmp_path / "fake-mcp"
    launcher.write_text(f"#!/bin/sh\nexec {sys.executable} {SERVER_SCRIPT} stdio\n")
    launcher.chmod(0o755)
    serve_mcp(trusted_tools=["add", "pid"], command=str(launcher), args=[])
    [first] = tool_entries(run(session, alice, "call mcp__fake__pid {}"))
    launcher.chmod(stat.S_IRUSR)  # the operator broke it; then the server died
    os.kill(int(first.content), signal.SIGKILL)
    result = run(session, alice, BOTH)
    assert result.status == "completed"
    added, calculated = tool_entries(result)
    assert added.is_error
    assert "MCP server 'fake' cannot be reached" in added.content
    assert "is not an executable file" in added.content
    assert (calculated.content, calculated.is_error) == ("42", False)
    assert_history_valid(session)


def test_a_server_never_reached_offers_nothing_and_the_turn_goes_on(
    session, alice, settings, tmp_path, api
):
    settings.MCP_SERVERS_FILE = str(tmp_path / "down.toml")
    (tmp_path / "down.toml").write_text(
        '[servers.down]\ntransport = "stdio"\ncommand = "/nonexistent/mcp-server"\n'
    )
    result = run(session, alice, 'call calculator {"expression": "6*7"}')
    assert [(e.content, e.is_error) for e in tool_entries(result)] == [("42", False)]
    body = api.get("/api/tools/").json()
    assert not [tool for tool in body["tools"] if tool["source"] == "mcp"]
    [down] = body["servers"]
    assert down["name"] == "down" and not down["listed"]
    assert "/nonexistent/mcp-server" in down["error"]


def test_the_tools_list_has_mcp_tools_with_needs_approval(serve_mcp, api):
    serve_mcp(trusted_tools=["add"])
    response = api.get("/api/tools/")
    assert response.status_code == 200
    tools = {tool["name"]: tool for tool in response.json()["tools"]}
    assert tools["calculator"]["source"] == "builtin"
    assert tools["forget"]["needs_approval"] is True
    add, note = tools["mcp__fake__add"], tools["mcp__fake__write_note"]
    assert (add["source"], add["server"], add["needs_approval"]) == ("mcp", "fake", False)
    assert note["needs_approval"] is True
    assert add["parameters"]["properties"].keys() == {"a", "b"}
    assert add["description"] == "[MCP server fake] Add two integers."


@pytest.mark.parametrize("transport", ["stdio"])
def test_a_trusted_tool_whose_definition_changed_asks_first(serve_mcp, session, alice):
    serve_mcp(trusted_tools=["add", "redefine_add"])
    [entry] = tool_entries(run(session, alice, 'call mcp__fake__add {"a": 2, "b": 3}'))
    assert entry.content == "5"
    run(session, alice, "call mcp__fake__redefine_add {}")
    turn = TurnInThread(session, alice.id, 'call mcp__fake__add {"a": 2, "b": 3}')
    request = turn.request()
    assert request["tool"] == "mcp__fake__add"
    approvals.approval_decide(
        session_id=session, owner_id=alice.id, call_id=request["call_id"], allow=False
    )
    [entry] = tool_entries(turn.finish())
    assert (entry.content, entry.is_error) == (DENIED_TEXT, True)
    assert_history_valid(session)
    get_store().get_messages(session)


@pytest.mark.parametrize("transport", ["stdio"])
@pytest.mark.parametrize("api", ["openai", "anthropic"])
def test_real_providers_take_the_offered_tools_and_the_history(serve_mcp, session, alice, api):
    """Through the official SDKs, against the strict fake of both APIs: every offered name
    passes their rule (a server's `find.notes` too), and the calls' history is accepted."""
    serve_mcp(trusted_tools=["add", "find.notes"])

    def responder(body):
        tools = [t.get("function", t)["name"] for t in body.get("tools", [])]
        sent_results = json.dumps(body["messages"]).count("no notes about taxes")
        if sent_results:
            return Reply(text="Nothing about taxes, and 2+3 is 5.")
        find = next(name for name in tools if name.startswith("mcp__fake__find_notes_"))
        return Reply(calls=[("mcp__fake__add", {"a": 2, "b": 3}), (find, {"query": "taxes"})])

    with FakeLLMServer(responder=responder) as llm:
        provider = (
            OpenAIProvider("gpt-4o", api_key="test", base_url=llm.openai_url, max_retries=0)
            if api == "openai"
            else AnthropicProvider(
                "claude-haiku-4-5", api_key="test", base_url=llm.base_url, max_retries=0
            )
        )
        result = turn_run(session_id=session, owner_id=alice.id, text="hi", provider=provider)
        assert llm.refusals == []
    assert result.status == "completed"
    assert [(e.content, e.is_error) for e in tool_entries(result)] == [
        ("5", False),
        ("no notes about taxes", False),
    ]
    assert_history_valid(session)
