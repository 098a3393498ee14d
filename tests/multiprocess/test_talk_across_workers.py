"""docs/design.md §18 across real Daphne workers on one PostgreSQL database, with no shared
channel layer: a steer sent to one worker reaches the turn running on another, and a queued
prompt outlives the worker whose turn it waited for."""

import asyncio
import json
import uuid
from datetime import timedelta

import pytest
from django.db import connections
from django.utils import timezone

from memory_app.services import working_memory_remember
from sessions_app.models import Worker
from sessions_app.runtime.context.history import (
    project_anthropic,
    project_openai,
    validate_anthropic,
    validate_openai,
)
from sessions_app.store import get_store
from tests.conftest import requires_postgres
from tests.helpers import GUARD_SEC, eventually
from tests.multiprocess.clients import http, receive, ws_connect
from tests.multiprocess.servers import daphne

pytestmark = [requires_postgres, pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


async def until_type(ws, kind):
    seen = []
    while not seen or seen[-1]["type"] != kind:
        seen.append(await receive(ws))
    return seen


def remember_color(session_id):
    """Something for `forget` to ask about; from a thread whose connection is closed after."""
    try:
        working_memory_remember(session_id=session_id, key="color", value="blue")
    finally:
        connections.close_all()


def valid_history(session_id):
    entries = get_store().get_messages(session_id)
    validate_openai(project_openai(entries, "system"))
    validate_anthropic(project_anthropic(entries, "system")[1])
    return entries


def test_a_steer_from_a_socket_on_worker_b_reaches_the_turn_on_worker_a(alice, alice_token):
    session_id = f"mp-{uuid.uuid4().hex[:8]}"
    with daphne() as worker_a, daphne() as worker_b:

        async def scenario():
            async with ws_connect(worker_a, session_id, alice_token) as tab_a:
                await receive(tab_a)
                await asyncio.to_thread(remember_color, session_id)
                # The turn waits for the person's approval: the test decides when it goes on.
                await tab_a.send(json.dumps({"type": "prompt", "text": "forget my color"}))
                request = (await until_type(tab_a, "approval_request"))[-1]
                async with ws_connect(worker_b, session_id, alice_token) as tab_b:
                    await receive(tab_b)
                    await tab_b.send(
                        json.dumps({"type": "prompt", "text": "what is 5+6", "mode": "steer"})
                    )
                    queued = (await until_type(tab_b, "queued"))[-1]
                    assert queued["mode"] == "steer"
                    await tab_b.send(
                        json.dumps(
                            {"type": "approval", "call_id": request["call_id"], "allow": True}
                        )
                    )
                return await until_type(tab_a, "agent_end")

        seen = asyncio.run(scenario())
    assert seen[-1]["status"] == "completed"
    entries = valid_history(session_id)
    steers = [e for e in entries if e.role == "user" and (e.data or {}).get("steer")]
    assert [(e.content, e.turn_id) for e in steers] == [("what is 5+6", seen[-1]["turn_id"])]
    assert "11" in entries[-2].content
    assert [e.kind for e in entries].count("turn_start") == 1


def test_a_queued_prompt_survives_sigkill_of_the_turns_worker_and_runs_on_the_other(
    alice, alice_token
):
    session_id = f"mp-{uuid.uuid4().hex[:8]}"
    with daphne() as worker_a, daphne(QUEUE_SWEEP_SEC="1") as worker_b:

        async def turn_waiting_on_a():
            async with ws_connect(worker_a, session_id, alice_token) as tab:
                await receive(tab)
                await asyncio.to_thread(remember_color, session_id)
                await tab.send(json.dumps({"type": "prompt", "text": "forget my color"}))
                await until_type(tab, "approval_request")

        asyncio.run(turn_waiting_on_a())
        status, body = http(
            "POST",
            f"{worker_b}/api/sessions/{session_id}/messages/",
            alice_token,
            {"text": "what is 2+3", "mode": "queue"},
        )
        assert (status, body["position"]) == (202, 0)
        worker_a.process.kill()  # SIGKILL: the turn, its lease and the queue are left as they are
        worker_a.process.wait(GUARD_SEC)
        # Nobody else runs it while the lease holder lives: let WORKER_DEAD_SEC pass for it.
        Worker.objects.filter(id__contains=f":{worker_a.process.pid}:").update(
            heartbeat_at=timezone.now() - timedelta(seconds=60)
        )

        def answered():
            entries = get_store().get_messages(session_id)
            ends = [e.data["status"] for e in entries if e.kind == "turn_end"]
            return entries if ends == ["interrupted", "completed"] else None

        entries = eventually(answered, what="worker B ran the queued prompt")
    valid_history(session_id)
    assert [e.content for e in entries if e.role == "user"] == ["forget my color", "what is 2+3"]
    assert "5" in entries[-2].content
