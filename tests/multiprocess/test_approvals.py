"""Approvals across real Daphne workers on one PostgreSQL database: a request waiting on one
worker is answered from another (its socket or its API), and a worker killed while a call
waits leaves a call that the next turn closes with a result saying so."""

import asyncio
import json
import os
import uuid

import pytest

from memory_app.services import working_memory_recall, working_memory_remember
from sessions_app.models import ToolApproval
from sessions_app.runtime.turn.approvals import DENIED_TEXT, INTERRUPTED_TEXT
from sessions_app.runtime.turn.turns import turn_run
from sessions_app.store import get_store
from tests.conftest import requires_postgres
from tests.helpers import GUARD_SEC
from tests.multiprocess.servers import daphne
from tests.multiprocess.test_live_connections import receive, ws_connect
from tests.multiprocess.test_worker_safety import http

pytestmark = [requires_postgres, pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

REDIS_URL = os.environ.get("TEST_REDIS_URL", "redis://127.0.0.1:6379/0")


async def until_type(ws, kind):
    seen = []
    while not seen or seen[-1]["type"] != kind:
        seen.append(await receive(ws))
    return seen


def tool_results(seen):
    return [
        (e["entry"]["content"], e["entry"]["is_error"])
        for e in seen
        if e["type"] == "entry" and e["entry"]["role"] == "tool"
    ]


def test_a_request_on_one_worker_is_answered_from_the_other(alice, alice_token):
    """No shared channel layer: the decision travels through the database alone."""
    session_id = f"mp-{uuid.uuid4().hex[:8]}"
    with daphne() as worker_a, daphne() as worker_b:

        async def scenario():
            async with ws_connect(worker_a, session_id, alice_token) as tab_a:
                await receive(tab_a)
                await asyncio.to_thread(
                    working_memory_remember, session_id=session_id, key="color", value="blue"
                )

                # Denied through the API of the other worker.
                await tab_a.send(json.dumps({"type": "prompt", "text": "forget my color"}))
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

                # Allowed from a tab opened on the other worker while the call waits.
                await tab_a.send(json.dumps({"type": "prompt", "text": "forget my color"}))
                request = (await until_type(tab_a, "approval_request"))[-1]
                async with ws_connect(worker_b, session_id, alice_token) as tab_b:
                    snapshot = await receive(tab_b)
                    assert [a["call_id"] for a in snapshot["approvals"]] == [request["call_id"]]
                    await tab_b.send(
                        json.dumps(
                            {"type": "approval", "call_id": request["call_id"], "allow": True}
                        )
                    )
                    seen = await until_type(tab_a, "agent_end")
                assert tool_results(seen) == [("forgot color", False)]
                assert seen[-1]["status"] == "completed"

        asyncio.run(scenario())
    assert working_memory_recall(session_id=session_id) == {}


def test_with_redis_a_tab_on_the_other_worker_is_asked_and_answers(alice, alice_token):
    session_id = f"mp-{uuid.uuid4().hex[:8]}"
    with daphne(REDIS_URL=REDIS_URL) as worker_a, daphne(REDIS_URL=REDIS_URL) as worker_b:

        async def scenario():
            async with (
                ws_connect(worker_a, session_id, alice_token) as tab_a,
                ws_connect(worker_b, session_id, alice_token) as tab_b,
            ):
                await receive(tab_a)
                await receive(tab_b)
                await tab_a.send(json.dumps({"type": "prompt", "text": "forget my color"}))
                request = (await until_type(tab_b, "approval_request"))[-1]
                await tab_b.send(
                    json.dumps({"type": "approval", "call_id": request["call_id"], "allow": False})
                )
                for tab in (tab_a, tab_b):
                    seen = await until_type(tab, "agent_end")
                    ending = next(e for e in seen if e["type"] == "approval_end")
                    assert ending["status"] == "denied"
                    assert tool_results(seen) == [(DENIED_TEXT, True)]

        asyncio.run(scenario())


def test_a_worker_killed_while_a_call_waits_leaves_a_result_saying_so(alice, alice_token):
    session_id = f"mp-{uuid.uuid4().hex[:8]}"
    with daphne() as worker:

        async def scenario():
            async with ws_connect(worker, session_id, alice_token) as tab:
                await receive(tab)
                await tab.send(json.dumps({"type": "prompt", "text": "forget my color"}))
                return (await until_type(tab, "approval_request"))[-1]

        request = asyncio.run(scenario())
        worker.process.kill()  # SIGKILL: no wrap-up, the pending row and the open turn stay
        worker.process.wait(GUARD_SEC)
    assert ToolApproval.objects.get(call_id=request["call_id"]).status == "pending"

    # The next use of the session repairs the dead turn first.
    result = turn_run(session_id=session_id, text="what did I say", owner_id=alice.id)
    assert result.status == "completed"
    history = get_store().get_messages(session_id)
    results = [e for e in history if e.role == "tool" and e.tool_call_id == request["call_id"]]
    assert [(e.content, e.is_error) for e in results] == [(INTERRUPTED_TEXT, True)]
    assert [e.data["status"] for e in history if e.kind == "turn_end"] == [
        "interrupted",
        "completed",
    ]
    assert ToolApproval.objects.get(call_id=request["call_id"]).status == "interrupted"
