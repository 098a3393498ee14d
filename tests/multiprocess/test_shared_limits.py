"""Rate limits hold across workers (docs/design.md §12): behind a proxy that spreads a
person's requests over two workers, the person gets the limit once, not once per worker."""

import asyncio
import json
import uuid

import pytest

from jarvis_site.shared.errors import Code
from tests.multiprocess.clients import receive, ws_connect
from tests.multiprocess.redis_layer import TEST_REDIS_URL, requires_redis
from tests.multiprocess.servers import daphne

pytestmark = pytest.mark.django_db(transaction=True)

PROMPTS = 10


async def prompt_on(base, token) -> dict:
    """One prompt in a session of its own; the turn's end, or the error that refused it."""
    async with ws_connect(base, f"limit-{uuid.uuid4().hex[:8]}", token) as tab:
        assert (await receive(tab))["type"] == "session"
        await tab.send(json.dumps({"type": "prompt", "text": "what is 2+3"}))
        while (event := await receive(tab))["type"] not in ("agent_end", "error"):
            pass
        return event


@requires_redis
def test_ten_prompts_alternating_between_two_workers_start_exactly_five(alice_token):
    env = {"REDIS_URL": TEST_REDIS_URL, "TURN_THROTTLE_RATE": "5/min"}
    with daphne(**env) as worker_a, daphne(**env) as worker_b:

        async def scenario():
            workers = (worker_a, worker_b)
            return [await prompt_on(workers[n % 2], alice_token) for n in range(PROMPTS)]

        ends = asyncio.run(scenario())

    started = [end for end in ends if end["type"] == "agent_end"]
    refused = [end for end in ends if end["type"] == "error"]
    assert len(started) == 5
    assert all(end["status"] == "completed" for end in started)
    # The five that went through were the first five, whichever worker each reached.
    assert [end["type"] for end in ends] == ["agent_end"] * 5 + ["error"] * 5
    assert {end["code"] for end in refused} == {Code.THROTTLED}
    assert all("try again in" in end["message"] for end in refused)
