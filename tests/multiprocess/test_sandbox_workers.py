"""docs/design.md §28 across two real Daphne workers on one PostgreSQL database: no worker
keeps a session's files, so a file one worker's run wrote is there for the next turn, run
by the other worker for a socket connected to it."""

import asyncio
import json
import uuid

import pytest
from django.core.management import call_command

from tests.conftest import requires_postgres
from tests.multiprocess.clients import receive, ws_connect
from tests.multiprocess.servers import daphne

pytestmark = [requires_postgres, pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


async def turn_events(worker, session_id, token, text):
    async with ws_connect(worker, session_id, token) as tab:
        await receive(tab)
        await tab.send(json.dumps({"type": "prompt", "text": text}))
        seen = [await receive(tab)]
        while seen[-1]["type"] != "agent_end":
            seen.append(await receive(tab))
        return seen


def run_result(seen) -> dict:
    (result,) = [e["entry"] for e in seen if e["type"] == "entry" and e["entry"]["role"] == "tool"]
    assert result["name"] == "run_code" and not result["is_error"], result
    return json.loads(result["content"])


def test_a_file_written_on_one_worker_is_read_on_the_other(alice, alice_token):
    call_command("sandbox_setup", verbosity=0)
    session_id = f"mp-{uuid.uuid4().hex[:8]}"
    with daphne() as worker_a, daphne() as worker_b:
        written = asyncio.run(
            turn_events(worker_a, session_id, alice_token, "run bash: echo 'from worker a' > a.txt")
        )
        read = asyncio.run(
            turn_events(
                worker_b, session_id, alice_token, "run python: print(open('a.txt').read())"
            )
        )
    assert written[-1]["status"] == "completed"
    assert [file["path"] for file in run_result(written)["files"]] == ["a.txt"]
    assert read[-1]["status"] == "completed"
    assert run_result(read)["stdout"] == "from worker a\n\n"
