"""Redis goes away under streaming answers (docs/design.md §32): two real Daphne workers on
PostgreSQL and a Redis server of the test's own, which the test stops and starts again.

Each worker runs one answer and watches the other's. While Redis is away each answer goes on
to its end on the socket of its own worker and no socket closes; a socket that opens meanwhile
is told to come back (4503); `/readyz` says `redis`. Once Redis is back the watching tabs
receive the rest of each answer, every event_seq in order, on the same socket, and each worker
runs a new turn at once."""

import asyncio
import json
import time
import urllib.error
import urllib.request
import uuid

import pytest
from websockets.exceptions import ConnectionClosed

from sessions_app.store import get_store
from sessions_app.web.consumers import CLOSE_TRY_AGAIN_LATER
from tests.conftest import requires_postgres
from tests.fakes.llm_server import FakeLLMServer, Hold, Reply
from tests.helpers import GUARD_SEC, eventually
from tests.multiprocess.clients import receive, ws_connect
from tests.multiprocess.outages import REDIS_SERVER, redis_server
from tests.multiprocess.servers import daphne
from tests.multiprocess.test_approvals import until_type

pytestmark = [
    requires_postgres,
    pytest.mark.postgres,
    pytest.mark.skipif(REDIS_SERVER is None, reason="redis-server is not installed"),
    pytest.mark.django_db(transaction=True),
]

ANSWER = " ".join(f"w{n:03d}" for n in range(80))
# What docs/design.md §32 promises once Redis is back.
NEW_TURN_WITHIN_SEC = 2.0


def readiness(base: str) -> tuple[int, dict]:
    try:
        with urllib.request.urlopen(base + "/readyz", timeout=GUARD_SEC) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


@pytest.fixture
def outage_rig(alice):
    with redis_server() as redis, FakeLLMServer() as model:
        env = {
            "REDIS_URL": redis.url,
            "JARVIS_MODEL": "openai:gpt-4o-mini",
            "OPENAI_BASE_URL": model.openai_url,
            "OPENAI_API_KEY": "test",
        }
        with daphne(**env) as worker_a, daphne(**env) as worker_b:
            yield redis, model, worker_a, worker_b


def turn_events(events: list[dict], turn_id: str) -> list[dict]:
    return [event for event in events if event.get("turn_id") == turn_id]


def test_answers_stream_through_a_redis_outage_and_the_other_worker_catches_up(
    outage_rig, alice_token
):
    redis, model, worker_a, worker_b = outage_rig
    sessions = [f"ro-{uuid.uuid4().hex[:8]}" for _ in range(2)]
    holds = [Hold(words=20), Hold(words=20)]
    model.script(*(Reply(text=ANSWER, hold=hold) for hold in holds))

    async def scenario():
        # Session 0 runs on worker A and is watched on B; session 1 the other way round.
        async with (
            ws_connect(worker_a, sessions[0], alice_token) as runs_0,
            ws_connect(worker_b, sessions[0], alice_token) as watches_0,
            ws_connect(worker_b, sessions[1], alice_token) as runs_1,
            ws_connect(worker_a, sessions[1], alice_token) as watches_1,
        ):
            tabs = [runs_0, watches_0, runs_1, watches_1]
            seen = {tab: [] for tab in tabs}
            for tab in tabs:
                assert (await receive(tab))["type"] == "session"
            for tab in (runs_0, runs_1):
                await tab.send(json.dumps({"type": "prompt", "text": "count for me"}))
            for hold in holds:
                assert await asyncio.to_thread(hold.reached.wait, GUARD_SEC)
            for tab in tabs:  # every tab, the watching ones too, sees its answer begin
                seen[tab] += await until_type(tab, "delta")

            redis.stop()
            for base in (worker_a, worker_b):
                status, body = await asyncio.to_thread(
                    eventually,
                    lambda base=base: (r := readiness(base))[0] == 503 and r,
                    what="readyz says Redis is away",
                )
                assert body["status"] == "redis", body
            # A socket that opens now is told to come back, and the page does.
            async with ws_connect(worker_b, sessions[0], alice_token) as late:
                with pytest.raises(ConnectionClosed) as closed:
                    while True:
                        await receive(late)
            assert closed.value.rcvd.code == CLOSE_TRY_AGAIN_LATER, worker_b.output()[-6000:]

            for hold in holds:
                hold.release()
            # Each answer ends on the socket of the worker that runs it, Redis still away.
            for tab in (runs_0, runs_1):
                seen[tab] += await until_type(tab, "agent_end")
                assert seen[tab][-1]["status"] == "completed"

            redis.start()
            back = time.monotonic()
            for tab in (watches_0, watches_1):
                seen[tab] += await until_type(tab, "agent_end")
            # A new turn on each worker, on the sockets that lived through it all.
            new_turn_sec = []
            for tab in (runs_0, runs_1):
                await tab.send(json.dumps({"type": "prompt", "text": "still there?"}))
                ended = await until_type(tab, "agent_end")
                assert ended[-1]["status"] == "completed", ended
                new_turn_sec.append(time.monotonic() - back)
            for base in (worker_a, worker_b):
                await asyncio.to_thread(
                    eventually, lambda base=base: readiness(base)[0] == 200, what="ready again"
                )
            return seen, tabs, new_turn_sec

    seen, tabs, new_turn_sec = asyncio.run(scenario())
    for tab in tabs:
        turn_id = next(event["turn_id"] for event in seen[tab] if event["type"] == "delta")
        events = turn_events(seen[tab], turn_id)
        # Every tab was open before its turn started: it has every event, in order.
        assert [event["event_seq"] for event in events] == list(range(1, len(events) + 1))
        assert "".join(e["text"] for e in events if e["type"] == "delta") == ANSWER
        assert events[-1]["type"] == "agent_end" and events[-1]["status"] == "completed"
    for session_id in sessions:
        answers = [
            entry.content
            for entry in get_store().get_messages(session_id)
            if entry.role == "assistant"
        ]
        assert answers[0] == ANSWER
    assert max(new_turn_sec) < NEW_TURN_WITHIN_SEC, new_turn_sec
