"""Several Daphne processes on one PostgreSQL database: the live-connection registry and the
delete lock hold across processes, and tabs on different workers share one conversation."""

import asyncio
import json
import urllib.error
import urllib.request
import uuid

import pytest
from websockets.asyncio.client import connect

from sessions_app.models import LiveConnection
from sessions_app.store import get_store
from tests.builders import user
from tests.conftest import requires_postgres
from tests.helpers import GUARD_SEC
from tests.multiprocess.redis_layer import TEST_REDIS_URL, requires_redis
from tests.multiprocess.servers import daphne

pytestmark = [requires_postgres, pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

RECEIVE_TIMEOUT = GUARD_SEC  # a guard against hanging only


def http(method, url, token):
    request = urllib.request.Request(
        url,
        method=method,
        headers={"Authorization": f"Token {token}", "Accept": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=RECEIVE_TIMEOUT) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def ws_connect(base, session_id, token, query=""):
    host = base.removeprefix("http://")
    return connect(
        f"ws://{host}/ws/sessions/{session_id}/{query}",
        origin=base,
        additional_headers={"Authorization": f"Token {token}"},
        open_timeout=RECEIVE_TIMEOUT,
    )


async def receive(ws):
    return json.loads(await asyncio.wait_for(ws.recv(), RECEIVE_TIMEOUT))


async def delete_until_done(base, session_id, token):
    """DELETE, retrying while the closed socket's worker has not unregistered it yet (a state
    of another process the test can only poll for)."""
    deadline = asyncio.get_running_loop().time() + GUARD_SEC
    while True:
        status, body = await asyncio.to_thread(
            http, "DELETE", f"{base}/api/sessions/{session_id}/", token
        )
        if status != 409 or asyncio.get_running_loop().time() > deadline:
            return status, body
        await asyncio.sleep(0.1)


def test_a_socket_on_one_worker_blocks_delete_on_another(alice_token):
    session_id = f"mp-{uuid.uuid4().hex[:8]}"
    with daphne() as worker_a, daphne() as worker_b:

        async def scenario():
            async with ws_connect(worker_a, session_id, alice_token) as ws:
                first = await receive(ws)
                assert first["type"] == "session" and first["session"]["id"] == session_id
                status, body = await asyncio.to_thread(
                    http, "DELETE", f"{worker_b}/api/sessions/{session_id}/", alice_token
                )
                assert status == 409 and body["code"] == "session_connected", body
            status, body = await delete_until_done(worker_b, session_id, alice_token)
            assert (status, body) == (200, {"deleted": True, "exports": []})

        asyncio.run(scenario())
    assert get_store().get_meta(session_id) is None


@requires_redis
def test_tabs_on_two_workers_see_the_same_turn_through_redis(alice_token):
    session_id = f"mp-{uuid.uuid4().hex[:8]}"
    redis = {"REDIS_URL": TEST_REDIS_URL}
    with daphne(**redis) as worker_a, daphne(**redis) as worker_b:

        async def scenario():
            async with (
                ws_connect(worker_a, session_id, alice_token) as tab_a,
                ws_connect(worker_b, session_id, alice_token) as tab_b,
            ):
                await receive(tab_a)
                await receive(tab_b)
                await tab_a.send(json.dumps({"type": "prompt", "text": "what is 6*7?"}))
                seen = {"a": [], "b": []}
                for name, tab in (("a", tab_a), ("b", tab_b)):
                    while not seen[name] or seen[name][-1]["type"] != "agent_end":
                        seen[name].append(await receive(tab))
                assert seen["a"] == seen["b"]
                answers = [
                    e["entry"]["content"]
                    for e in seen["b"]
                    if e["type"] == "entry" and e["entry"]["role"] == "assistant"
                ]
                assert "42" in answers[-1]

        asyncio.run(scenario())


@pytest.mark.parametrize("backend", ["db", "jsonl"])
def test_delete_racing_a_reconnect_never_leaves_a_socket_on_a_lost_history(
    alice_token, alice, backend, settings
):
    """30 rounds of DELETE on one worker fired together with a connect on the other.

    Either the delete sees the socket (409, history intact and shown) or it finishes first
    (200, and the socket opens a new, empty session). Never a socket on a history that is gone.
    """
    settings.JARVIS_SESSION__PERSISTENCE_BACKEND = backend
    get_store.cache_clear()
    store = get_store()
    env = {"JARVIS_SESSION__PERSISTENCE_BACKEND": backend}
    outcomes = {"refused": 0, "deleted first": 0}
    with daphne(**env) as worker_a, daphne(**env) as worker_b:

        async def race(session_id):
            """Connect on A and DELETE on B at once; return what each saw, socket still open."""

            async def attach():
                ws = await ws_connect(worker_a, session_id, alice_token)
                return ws, await receive(ws)

            return await asyncio.gather(
                attach(),
                asyncio.to_thread(
                    http, "DELETE", f"{worker_b}/api/sessions/{session_id}/", alice_token
                ),
            )

        async def close_and_delete(ws, session_id):
            await ws.close()
            return await delete_until_done(worker_b, session_id, alice_token)

        # The test process's own database work stays outside the event loop (plain sync).
        for number in range(30):
            session_id = f"race-{number}-{uuid.uuid4().hex[:6]}"
            store.create(session_id, owner_id=alice.id)
            store.append(session_id, [user(f"round {number}")] * 3)
            loop = asyncio.new_event_loop()
            try:
                (ws, first), (status, body) = loop.run_until_complete(race(session_id))
                meta = store.get_meta(session_id)
                connected = LiveConnection.objects.filter(session_id=session_id).exists()
                cleanup = loop.run_until_complete(close_and_delete(ws, session_id))
            finally:
                loop.close()
            assert meta is not None, "a socket is open on a session that does not exist"
            assert connected
            if status == 409:
                assert body["code"] == "session_connected"
                assert len(first["entries"]) == 3 and meta.last_seq == 3
                outcomes["refused"] += 1
            else:
                assert (status, body) == (200, {"deleted": True, "exports": []})
                assert first["entries"] == [], "the socket shows a history that was deleted"
                assert meta.last_seq == 0
                outcomes["deleted first"] += 1
            assert cleanup == (200, {"deleted": True, "exports": []})
    assert sum(outcomes.values()) == 30
