"""Live turns across real Daphne workers on PostgreSQL and Redis (docs/design.md §17): a tab
that opens on the other worker than the running turn gets the answer so far and then exactly
its later events, and its Stop button ends the turn `aborted`."""

import asyncio
import json
import uuid

import pytest

from sessions_app.store import get_store
from tests.conftest import requires_postgres
from tests.fakes.llm_server import FakeLLMServer, Hold, Reply
from tests.helpers import GUARD_SEC
from tests.multiprocess.redis_layer import TEST_REDIS_URL, requires_redis
from tests.multiprocess.servers import daphne
from tests.multiprocess.test_approvals import until_type
from tests.multiprocess.test_live_connections import receive, ws_connect

pytestmark = [
    requires_postgres,
    requires_redis,
    pytest.mark.postgres,
    pytest.mark.django_db(transaction=True),
]

ANSWER = " ".join(f"w{n:03d}" for n in range(60))


@pytest.fixture
def two_workers(alice):
    with FakeLLMServer() as model:
        env = {
            "REDIS_URL": TEST_REDIS_URL,
            "JARVIS_MODEL": "openai:gpt-4o-mini",
            "OPENAI_BASE_URL": model.openai_url,
            "OPENAI_API_KEY": "test",
        }
        with daphne(**env) as worker_a, daphne(**env) as worker_b:
            yield model, worker_a, worker_b


async def start_held_turn(tab, model, **reply):
    hold = Hold(words=30)
    model.script(Reply(text=ANSWER, hold=hold, **reply))
    await receive(tab)
    await tab.send(json.dumps({"type": "prompt", "text": "count for me"}))
    seen = await until_type(tab, "delta")
    assert await asyncio.to_thread(hold.reached.wait, GUARD_SEC)
    return hold, seen[0]["turn_id"]


def test_a_tab_on_the_other_worker_joins_the_answer_where_it_is(two_workers, alice_token):
    model, worker_a, worker_b = two_workers
    session_id = f"mp-{uuid.uuid4().hex[:8]}"

    async def scenario():
        async with ws_connect(worker_a, session_id, alice_token) as tab_a:
            hold, turn_id = await start_held_turn(tab_a, model)
            async with ws_connect(worker_b, session_id, alice_token) as tab_b:
                snapshot = await receive(tab_b)
                hold.release()
                return turn_id, snapshot["running"], await until_type(tab_b, "agent_end")

    turn_id, running, later = asyncio.run(scenario())
    assert running["turn_id"] == turn_id and running["text"]
    streamed = "".join(e["text"] for e in later if e["type"] == "delta")
    stored = [e.content for e in get_store().get_messages(session_id) if e.role == "assistant"]
    assert stored == [ANSWER]
    assert running["text"] + streamed == ANSWER
    seqs = [e["event_seq"] for e in later if e.get("turn_id") == turn_id]
    assert seqs == list(range(running["event_seq"] + 1, running["event_seq"] + 1 + len(seqs)))
    assert later[-1]["status"] == "completed"


def test_stop_on_the_other_worker_ends_the_turn_aborted(two_workers, alice_token):
    model, worker_a, worker_b = two_workers
    session_id = f"mp-{uuid.uuid4().hex[:8]}"

    async def scenario():
        async with ws_connect(worker_a, session_id, alice_token) as tab_a:
            # A model that only an abort ends.
            hold, _ = await start_held_turn(tab_a, model, until_stopped=True)
            hold.release()
            async with ws_connect(worker_b, session_id, alice_token) as tab_b:
                snapshot = await receive(tab_b)
                assert snapshot["running"] is not None
                await tab_b.send(json.dumps({"type": "abort"}))
                ends = [(await until_type(tab, "agent_end"))[-1] for tab in (tab_b, tab_a)]
                return [end["status"] for end in ends]

    assert asyncio.run(scenario()) == ["aborted", "aborted"]
    ends = [e.data["status"] for e in get_store().get_messages(session_id) if e.kind == "turn_end"]
    assert ends == ["aborted"]
