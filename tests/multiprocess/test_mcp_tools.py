"""MCP tools across real Daphne workers on one PostgreSQL database (docs/design.md §31): the
fake MCP server (tests/fakes/mcp_server.py) over stdio — each worker starts its own — and
over streamable HTTP — both workers reach the one server. A trusted tool runs; an untrusted
one waits until a tab on the other worker allows it, or its API denies it; a Stop from the
other worker ends a slow call's turn at once; `GET /api/tools/` lists the MCP tools."""

import asyncio
import json
import os
import time
import uuid

import pytest

from sessions_app.runtime.turn.approvals import DENIED_TEXT
from sessions_app.store import get_store
from tests.conftest import requires_postgres
from tests.fakes.mcp_servers import http_env, http_server, http_table, servers_file, stdio_table
from tests.helpers import eventually
from tests.multiprocess.servers import daphne
from tests.multiprocess.test_approvals import tool_results, until_type
from tests.multiprocess.test_live_connections import receive, ws_connect
from tests.multiprocess.test_worker_safety import http
from tests.sessions_app.runtime.conftest import assert_history_valid

pytestmark = [requires_postgres, pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

REDIS_URL = os.environ.get("TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
TRUSTED = ["add", "slow"]


@pytest.fixture(params=["stdio", "http"])
def workers_env(request, tmp_path):
    """The environment of two workers that use the fake as `fake` over the test's transport."""
    directory = tmp_path / "mcp"
    directory.mkdir()
    if request.param == "stdio":
        table, env, running = stdio_table(directory, trusted_tools=TRUSTED), {}, None
    else:
        running = http_server(directory)
        server = running.__enter__()
        table, env = http_table(server.url, trusted_tools=TRUSTED), http_env(server.port)
    path = servers_file(tmp_path / "mcp.toml", fake=table)
    yield directory, {"MCP_SERVERS_FILE": str(path), "REDIS_URL": REDIS_URL, **env}
    if running is not None:
        running.__exit__(None, None, None)


async def prompt(tab, text):
    await tab.send(json.dumps({"type": "prompt", "text": text}))


def test_mcp_tools_on_two_workers(workers_env, alice_token):
    directory, env = workers_env
    session_id = f"mp-{uuid.uuid4().hex[:8]}"
    with daphne(**env) as worker_a, daphne(**env) as worker_b:

        async def scenario():
            async with ws_connect(worker_a, session_id, alice_token) as tab_a:
                await receive(tab_a)

                # A trusted tool runs at once.
                await prompt(tab_a, 'call mcp__fake__add {"a": 2, "b": 3}')
                seen = await until_type(tab_a, "agent_end")
                assert tool_results(seen) == [("5", False)]
                assert seen[-1]["status"] == "completed"

                # An untrusted one waits; a tab opened on the other worker allows it.
                await prompt(tab_a, 'call mcp__fake__write_note {"text": "buy milk"}')
                request = (await until_type(tab_a, "approval_request"))[-1]
                assert (request["tool"], request["arguments"]) == (
                    "mcp__fake__write_note",
                    {"text": "buy milk"},
                )
                async with ws_connect(worker_b, session_id, alice_token) as tab_b:
                    snapshot = await receive(tab_b)
                    assert [a["call_id"] for a in snapshot["approvals"]] == [request["call_id"]]
                    await tab_b.send(
                        json.dumps(
                            {"type": "approval", "call_id": request["call_id"], "allow": True}
                        )
                    )
                    seen = await until_type(tab_a, "agent_end")
                assert tool_results(seen) == [("noted: buy milk", False)]

                # Denied through the other worker's API: the denial is the result.
                await prompt(tab_a, 'call mcp__fake__write_note {"text": "sell the car"}')
                request = (await until_type(tab_a, "approval_request"))[-1]
                status, body = await asyncio.to_thread(
                    http,
                    "POST",
                    f"{worker_b}/api/sessions/{session_id}/approvals/{request['call_id']}/",
                    alice_token,
                    {"allow": False},
                )
                assert (status, body["status"]) == (200, "denied")
                seen = await until_type(tab_a, "agent_end")
                assert tool_results(seen) == [(DENIED_TEXT, True)]

                # Stop, pressed in a tab of the other worker, during a slow call.
                await prompt(tab_a, 'call mcp__fake__slow {"seconds": 120}')
                await asyncio.to_thread(
                    eventually,
                    lambda: (directory / "slow_started").exists(),
                    what="the slow call reached the server",
                )
                async with ws_connect(worker_b, session_id, alice_token) as tab_b:
                    await receive(tab_b)
                    stopped_at = time.monotonic()
                    await tab_b.send(json.dumps({"type": "abort"}))
                    seen = await until_type(tab_a, "agent_end")
                    ended_after = time.monotonic() - stopped_at
                assert seen[-1]["status"] == "aborted"
                assert ended_after < 1.0, f"the turn ended {ended_after:.2f} s after Stop"
                [(text, is_error)] = tool_results(seen)
                assert is_error and "stopped" in text

        asyncio.run(scenario())

        # Both workers offer the tools, with what each needs.
        status, body = http("GET", f"{worker_b}/api/tools/", alice_token)
        assert status == 200
        offered = {t["name"]: t["needs_approval"] for t in body["tools"] if t["source"] == "mcp"}
        assert offered["mcp__fake__add"] is False
        assert offered["mcp__fake__write_note"] is True

    assert (directory / "notes.txt").read_text() == "buy milk\n"
    eventually(lambda: (directory / "cancelled").exists(), what="the server heard the cancel")
    assert_history_valid(session_id)
    assert [
        e.data["status"] for e in get_store().get_messages(session_id) if e.kind == "turn_end"
    ] == [
        "completed",
        "completed",
        "completed",
        "aborted",
    ]
