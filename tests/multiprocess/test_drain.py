"""A worker sent SIGTERM drains (docs/design.md §19): readiness fails at once, it starts no
new turn, the running turn ends, its socket closes with 1012 after the `agent_end`, the process
exits 0 — and the page, reconnecting to the other worker, shows the whole answer.

The running turn is held by the person's approval (forgetting a memory asks first), so the
signal lands while it surely runs; the test lets it finish by answering.
"""

import asyncio
import json
import signal
import urllib.error
import urllib.request
import uuid

import pytest
from websockets.exceptions import ConnectionClosed

from memory_app.services import working_memory_remember
from sessions_app.runtime.context.history import (
    open_turn_id,
    project_anthropic,
    project_openai,
    unanswered_calls,
    validate_anthropic,
    validate_openai,
)
from sessions_app.store import get_store
from tests.conftest import requires_postgres
from tests.helpers import GUARD_SEC, eventually
from tests.multiprocess.clients import RECEIVE_TIMEOUT, http, receive, ws_connect
from tests.multiprocess.redis_layer import TEST_REDIS_URL, requires_redis
from tests.multiprocess.servers import daphne

pytestmark = pytest.mark.django_db(transaction=True)

HELD_PROMPT = "forget my color and wait 4 seconds"


def readiness(base: str) -> tuple[int, dict]:
    try:
        with urllib.request.urlopen(f"{base}/readyz", timeout=RECEIVE_TIMEOUT) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


async def until_type(ws, kind: str) -> list[dict]:
    seen = []
    while not seen or seen[-1]["type"] != kind:
        seen.append(await receive(ws))
    return seen


async def close_code(ws) -> int:
    """Read to the end of the socket; the code the server closed it with."""
    with pytest.raises(ConnectionClosed) as closed:
        while True:
            await receive(ws)
    return closed.value.rcvd.code


async def stop_while_held(worker, tab, session_id) -> dict:
    """Send the held prompt, SIGTERM the worker while the turn waits for approval, and check
    what a draining worker answers. Returns the approval request."""
    await tab.send(json.dumps({"type": "prompt", "text": HELD_PROMPT}))
    request = (await until_type(tab, "approval_request"))[-1]
    worker.process.send_signal(signal.SIGTERM)
    await asyncio.to_thread(
        eventually,
        lambda: readiness(worker) == (503, {"status": "draining"}),
        what="the draining worker's /readyz answers 503",
    )
    # No new turn starts here: a prompt to another session is sent elsewhere.
    status, body = await asyncio.to_thread(
        http,
        "POST",
        f"{worker}/api/sessions/{session_id}-2/messages/",
        worker.token,
        {"text": "hi"},
    )
    assert (status, body["code"]) == (503, "draining")
    return request


@requires_redis
@requires_postgres
@pytest.mark.postgres
def test_a_worker_stopped_mid_turn_finishes_it_and_the_page_reads_it_on_the_other(
    alice_token,
):
    session_id = f"drain-{uuid.uuid4().hex[:8]}"
    working_memory_remember(session_id=session_id, key="color", value="blue")
    env = {"REDIS_URL": TEST_REDIS_URL}
    with daphne(serve=True, **env) as worker_a, daphne(serve=True, **env) as worker_b:
        worker_a.token = alice_token
        assert http("POST", f"{worker_b}/api/sessions/", alice_token, {"id": f"{session_id}-2"})[0]

        async def scenario():
            async with ws_connect(worker_a, session_id, alice_token) as tab:
                await receive(tab)
                request = await stop_while_held(worker_a, tab, session_id)
                await tab.send(
                    json.dumps({"type": "approval", "call_id": request["call_id"], "allow": True})
                )
                end = (await until_type(tab, "agent_end"))[-1]
                assert end["status"] == "completed"
                assert await close_code(tab) == 1012
            assert await asyncio.to_thread(worker_a.process.wait, GUARD_SEC) == 0

            # The page reconnects; the proxy sends it to the other worker.
            async with ws_connect(worker_b, session_id, alice_token) as tab:
                return (await receive(tab))["entries"]

        entries = asyncio.run(scenario())
    answer = [e["content"] for e in entries if e["role"] == "assistant" and not e["tool_calls"]]
    assert answer and "I forgot your color" in answer[-1] and "waited 4 seconds" in answer[-1]
    assert entries[-1]["kind"] == "turn_end" and entries[-1]["data"]["status"] == "completed"


def test_a_turn_still_running_when_the_grace_period_ends_is_aborted_and_closed(alice_token):
    session_id = f"drain-{uuid.uuid4().hex[:8]}"
    working_memory_remember(session_id=session_id, key="color", value="blue")
    # The approval is never given: the turn runs past the grace period.
    with daphne(serve=True, DRAIN_TIMEOUT_SEC=1) as worker:
        worker.token = alice_token
        assert http("POST", f"{worker}/api/sessions/", alice_token, {"id": f"{session_id}-2"})[0]

        async def scenario():
            async with ws_connect(worker, session_id, alice_token) as tab:
                await receive(tab)
                await stop_while_held(worker, tab, session_id)
                seen = await until_type(tab, "agent_end")
                assert await close_code(tab) == 1012
            assert await asyncio.to_thread(worker.process.wait, GUARD_SEC) == 0
            return seen

        seen = asyncio.run(scenario())
    assert seen[-1]["status"] == "aborted"
    history = get_store().get_messages(session_id)
    assert any(entry.tool_calls for entry in history)
    assert unanswered_calls(history) == [] and open_turn_id(history) is None
    assert history[-1].kind == "turn_end" and history[-1].data["status"] == "aborted"
    # Both providers accept the conversation as it was left.
    validate_openai(project_openai(history, "system"))
    validate_anthropic(project_anthropic(history, "system")[1])
