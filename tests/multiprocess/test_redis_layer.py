"""Real Daphne workers as a deployment runs them: the Redis channel layer holds (a quiet socket
stays open; under load every tab sees every turn whole), and only the site's own pages may
open a socket."""

import asyncio
import json
import uuid

import pytest
from websockets.exceptions import InvalidStatus

from tests.conftest import requires_postgres
from tests.multiprocess.clients import http, receive, until_agent_end, ws_connect
from tests.multiprocess.redis_layer import TEST_REDIS_URL, requires_redis
from tests.multiprocess.servers import daphne

pytestmark = pytest.mark.django_db(transaction=True)

# channels-redis waits for a socket's next message with 5 s BRPOPs; a client whose read
# timeout is no longer than that fails the wait of a quiet socket. Two waits and more.
IDLE_SEC = 12.5
CLIENTS = 20
PROMPTS = 4
# Long enough an answer that, streamed word by word, a turn would send ~160 deltas.
LONG_PROMPT = " ".join(f"word{number}" for number in range(120))
SCENARIO_TIMEOUT = 240


@requires_redis
def test_an_idle_socket_stays_open_and_answers_the_next_prompt(alice_token):
    session_id = f"idle-{uuid.uuid4().hex[:8]}"
    with daphne(REDIS_URL=TEST_REDIS_URL) as server:

        async def scenario():
            async with ws_connect(server, session_id, alice_token) as ws:
                assert (await receive(ws))["type"] == "session"
                # The reproduction is the quiet time itself; nothing is raced here.
                await asyncio.sleep(IDLE_SEC)
                await ws.send(json.dumps({"type": "prompt", "text": "what is 6*7?"}))
                events = await until_agent_end(ws)
            answers = [
                event["entry"]["content"]
                for event in events
                if event["type"] == "entry" and event["entry"]["role"] == "assistant"
            ]
            assert events[-1]["status"] == "completed"
            assert "42" in answers[-1]

        asyncio.run(scenario())


async def entries_after(base, session_id, token, after_seq):
    """What a tab fetches when `agent_end` names a seq it has not seen (the page does this)."""
    status, body = await asyncio.to_thread(
        http, "GET", f"{base}/api/sessions/{session_id}/entries/?after_seq={after_seq}", token
    )
    assert status == 200, body
    return [entry["seq"] for entry in body["entries"]]


@requires_redis
@requires_postgres
@pytest.mark.postgres
def test_twenty_clients_on_two_workers_lose_no_turn_event(alice_token):
    """20 sessions, each with a tab on both workers; one tab prompts 4 times. Every tab gets
    every turn's `agent_end`, and with the `last_seq` it names, the whole history."""
    # One user runs all 20 conversations: let each worker run them all at once (the per-user
    # turn limit is another matter, tested with the runtime), and let the user's 80 prompts
    # through the turn rate, which both workers now count together (docs/design.md §12).
    env = {
        "REDIS_URL": TEST_REDIS_URL,
        "MAX_TURNS_PER_USER": CLIENTS,
        "TURN_THROTTLE_RATE": f"{CLIENTS * PROMPTS}/min",
    }
    with daphne(**env) as worker_a, daphne(**env) as worker_b:

        async def client(number):
            session_id = f"load-{number}-{uuid.uuid4().hex[:6]}"
            home, other = (worker_a, worker_b) if number % 2 else (worker_b, worker_a)
            ends = 0
            async with (
                ws_connect(home, session_id, alice_token) as typing_tab,
                ws_connect(other, session_id, alice_token) as watching_tab,
            ):
                await receive(typing_tab)
                await receive(watching_tab)
                seen = {typing_tab: set(), watching_tab: set()}
                for prompt in range(PROMPTS):
                    await typing_tab.send(
                        json.dumps({"type": "prompt", "text": f"{prompt}: {LONG_PROMPT}"})
                    )
                    for tab, base in ((typing_tab, home), (watching_tab, other)):
                        events = await until_agent_end(tab, timeout=60)
                        end = events[-1]
                        assert end["status"] == "completed", end
                        ends += 1
                        seen[tab] |= {e["entry"]["seq"] for e in events if e["type"] == "entry"}
                        expected = set(range(1, end["last_seq"] + 1))
                        if seen[tab] != expected:
                            first_missing = min(expected - seen[tab])
                            seen[tab] |= set(
                                await entries_after(
                                    base, session_id, alice_token, first_missing - 1
                                )
                            )
                        assert seen[tab] == expected, end
            return ends

        async def scenario():
            return await asyncio.wait_for(
                asyncio.gather(*(client(number) for number in range(CLIENTS))),
                SCENARIO_TIMEOUT,
            )

        assert sum(asyncio.run(scenario())) == CLIENTS * PROMPTS * 2


def test_a_page_on_another_port_of_the_same_host_cannot_open_a_socket(alice_token):
    with daphne() as site, daphne() as other_port:

        async def scenario():
            with pytest.raises(InvalidStatus) as refused:
                async with ws_connect(site, "s1", alice_token, origin=other_port):
                    pass
            assert refused.value.response.status_code == 403
            async with ws_connect(site, "s1", alice_token, origin=site) as ws:
                assert (await receive(ws))["type"] == "session"

        asyncio.run(scenario())
