"""PostgreSQL goes away while answers end (docs/design.md §32): two real Daphne workers reach
the test database through a cut the test opens and closes (tests/multiprocess/outages.py), each
runs answers watched from the other.

Answers that end while the database is away are stored whole once it is back, and every tab,
on either worker, gets each turn's end. Away for longer than DB_OUTAGE_HOLD_SEC, each turn ends
`error` with the reason on every tab, and what it streamed is stored once the database is back.
"""

import asyncio
import json
import uuid
from datetime import timedelta

import pytest
from django.db import connection, connections
from django.utils import timezone

from jarvis_site.shared.errors import Code
from sessions_app.models import Session
from sessions_app.store import get_store
from sessions_app.store.db_lease import LEASE_TTL_SEC
from tests.conftest import requires_postgres
from tests.fakes.llm_server import FakeLLMServer, Hold, Reply
from tests.helpers import GUARD_SEC, database_url_of_test_db, eventually
from tests.multiprocess.clients import receive, ws_connect
from tests.multiprocess.outages import database_cut
from tests.multiprocess.redis_layer import TEST_REDIS_URL, requires_redis
from tests.multiprocess.servers import daphne
from tests.multiprocess.test_approvals import until_type

pytestmark = [
    requires_postgres,
    requires_redis,
    pytest.mark.postgres,
    pytest.mark.django_db(transaction=True),
]

ANSWER = " ".join(f"w{n:03d}" for n in range(60))
LEASE_TTL = timedelta(seconds=LEASE_TTL_SEC)
# What a worker logs when a turn's write meets the outage (runtime.turn.outage).
HOLDING = "holds what it has: the database is away"


@pytest.fixture
def rig(alice, request):
    """(model, cut, worker A, worker B); the workers reach PostgreSQL through `cut`."""
    settings = connection.settings_dict
    hold_sec = getattr(request, "param", 30)
    with FakeLLMServer() as model, database_cut(settings["HOST"], int(settings["PORT"])) as cut:
        through_cut = database_url_of_test_db().replace(
            f"{settings['HOST']}:{settings['PORT']}", f"127.0.0.1:{cut.port}"
        )
        env = {
            "DATABASE_URL": through_cut,
            "REDIS_URL": TEST_REDIS_URL,
            "JARVIS_MODEL": "openai:gpt-4o-mini",
            "OPENAI_BASE_URL": model.openai_url,
            "OPENAI_API_KEY": "test",
            "DB_OUTAGE_HOLD_SEC": hold_sec,
            "MAX_TURNS_PER_USER": 8,
        }
        with daphne(**env) as worker_a, daphne(**env) as worker_b:
            yield model, cut, worker_a, worker_b


def deltas(events: list[dict]) -> str:
    return "".join(event["text"] for event in events if event["type"] == "delta")


async def streamed_whole(tab, seen: list[dict]) -> None:
    """Read the tab until its answer has streamed to its last word."""
    while deltas(seen) != ANSWER:
        seen.append(await receive(tab))
        assert seen[-1]["type"] != "agent_end", seen[-1]


def holding_turns(worker) -> int:
    return worker.output().count(HOLDING)


def closing_thread_connection(function, *args, **kwargs):
    """`function` in a thread of its own whose database connection is closed afterwards (the
    test database is dropped at the end)."""
    try:
        return function(*args, **kwargs)
    finally:
        connections.close_all()


def stored(session_id: str) -> tuple[list[str], list[dict]]:
    entries = get_store().get_messages(session_id)
    answers = [entry.content for entry in entries if entry.role == "assistant"]
    return answers, [entry.data for entry in entries if entry.kind == "turn_end"]


async def held_answers(model, worker_a, worker_b, token, count):
    """`count` sessions, each running on one worker and watched from the other, their answers
    held half-way. Returns [(session, running tab, watching tab, events so far)]."""
    holds = [Hold(words=20) for _ in range(count)]
    model.script(*(Reply(text=ANSWER, hold=hold) for hold in holds))
    turns = []
    for number in range(count):
        session_id = f"do-{uuid.uuid4().hex[:8]}"
        home, other = (worker_a, worker_b) if number % 2 == 0 else (worker_b, worker_a)
        runs = await ws_connect(home, session_id, token)
        watches = await ws_connect(other, session_id, token)
        for tab in (runs, watches):
            assert (await receive(tab))["type"] == "session"
        await runs.send(json.dumps({"type": "prompt", "text": "count for me"}))
        turns.append((session_id, runs, watches, {runs: [], watches: []}))
    for hold in holds:
        assert await asyncio.to_thread(hold.reached.wait, GUARD_SEC)
    for _, runs, watches, seen in turns:
        for tab in (runs, watches):
            seen[tab] += await until_type(tab, "delta")
    return holds, turns


def test_answers_that_end_while_the_database_is_away_are_stored_whole(rig, alice_token):
    model, cut, worker_a, worker_b = rig

    async def scenario():
        holds, turns = await held_answers(model, worker_a, worker_b, alice_token, 4)
        try:
            cut.cut()
            for hold in holds:
                hold.release()
            for _, runs, watches, seen in turns:
                for tab in (runs, watches):
                    await streamed_whole(tab, seen[tab])
            # Each turn met the outage with its answer streamed: it holds its closing.
            await asyncio.to_thread(
                eventually,
                lambda: holding_turns(worker_a) + holding_turns(worker_b) >= len(turns),
                what="every turn holds its answer",
            )
            cut.restore()
            for _, runs, watches, seen in turns:
                for tab in (runs, watches):
                    seen[tab] += await until_type(tab, "agent_end")
            return turns
        finally:
            for _, runs, watches, _ in turns:
                await runs.close()
                await watches.close()

    turns = asyncio.run(scenario())
    for session_id, runs, watches, seen in turns:
        for tab in (runs, watches):
            end = seen[tab][-1]
            assert end["status"] == "completed", end
            assert deltas(seen[tab]) == ANSWER
        answers, ends = stored(session_id)
        assert answers == [ANSWER]
        assert [data["status"] for data in ends] == ["completed"]


@pytest.mark.parametrize("rig", [1], indirect=True)
def test_past_the_hold_each_turn_ends_error_everywhere_and_is_stored_when_it_returns(
    rig, alice_token
):
    model, cut, worker_a, worker_b = rig

    async def scenario():
        holds, turns = await held_answers(model, worker_a, worker_b, alice_token, 2)
        try:
            cut.cut()
            for hold in holds:
                hold.release()
            # DB_OUTAGE_HOLD_SEC is 1: each turn gives up while the database is still away.
            for _, runs, watches, seen in turns:
                for tab in (runs, watches):
                    seen[tab] += await until_type(tab, "agent_end")
            cut.restore()
            # The session is free again once the closing is stored: a new turn runs.
            _, runs, _, seen = turns[0]
            await asyncio.to_thread(
                closing_thread_connection,
                eventually,
                lambda: all(stored(session_id)[1] for session_id, *_ in turns),
                what="every turn's closing is stored",
            )
            await runs.send(json.dumps({"type": "prompt", "text": "again"}))
            again = await until_type(runs, "agent_end")
            return turns, again[-1]
        finally:
            for _, runs, watches, _ in turns:
                await runs.close()
                await watches.close()

    turns, again = asyncio.run(scenario())
    for session_id, runs, watches, seen in turns:
        for tab in (runs, watches):
            end = seen[tab][-1]
            assert end["status"] == "error", end
            assert end["code"] == Code.DATABASE_UNAVAILABLE
            assert "database could not be reached" in end["error"]
        answers, ends = stored(session_id)
        assert answers[0] == ANSWER  # what was streamed, stored once the database was back
        assert ends[0]["status"] == "error"
        assert "database could not be reached" in ends[0]["error"]
    assert again["status"] == "completed"


def test_a_turn_running_through_an_outage_keeps_its_lease(rig, alice_token):
    """The lease keeper's connection died with the outage: once the database is back it must
    renew the running turn's lease again, or the lease lapses under the turn and another turn
    could start in its session."""
    model, cut, worker_a, _ = rig
    hold = Hold(words=20)
    model.script(Reply(text=ANSWER, hold=hold))
    session_id = f"do-{uuid.uuid4().hex[:8]}"

    async def scenario():
        async with ws_connect(worker_a, session_id, alice_token) as tab:
            assert (await receive(tab))["type"] == "session"
            await tab.send(json.dumps({"type": "prompt", "text": "count for me"}))
            assert await asyncio.to_thread(hold.reached.wait, GUARD_SEC)
            cut.cut()
            # The keeper met the outage (it renews or checks every round).
            await asyncio.to_thread(
                eventually, lambda: "lease watch" in worker_a.output(), what="the keeper failed"
            )
            cut.restore()
            restored_at = timezone.now()
            renewed = await asyncio.to_thread(
                closing_thread_connection,
                eventually,
                lambda: (lease_expires_at(session_id) or restored_at) >= restored_at + LEASE_TTL,
                what="the lease renewed after the outage",
            )
            hold.release()
            end = (await until_type(tab, "agent_end"))[-1]
            return renewed, end

    renewed, end = asyncio.run(scenario())
    assert renewed
    assert end["status"] == "completed"


def lease_expires_at(session_id: str):
    return Session.objects.values_list("lease_expires_at", flat=True).get(id=session_id)
