"""What an operator reads from real workers: one `/metrics` view of every process on the host,
and JSON log lines that name the request, user, session and turn but never what was said."""

import asyncio
import json
import urllib.request
import uuid

import pytest

from tests.jarvis_site.test_probes import sample
from tests.multiprocess.clients import RECEIVE_TIMEOUT, http, receive, until_agent_end, ws_connect
from tests.multiprocess.servers import daphne

pytestmark = pytest.mark.django_db(transaction=True)


def scrape(base: str) -> str:
    with urllib.request.urlopen(f"{base}/metrics", timeout=RECEIVE_TIMEOUT) as response:
        return response.read().decode()


def test_one_scrape_counts_the_turns_and_sockets_of_both_workers(alice_token, tmp_path):
    shared = {"PROMETHEUS_MULTIPROC_DIR": tmp_path / "metrics"}
    with daphne(serve=True, **shared) as worker_a, daphne(serve=True, **shared) as worker_b:

        async def scenario():
            async with (
                ws_connect(worker_a, "on-a", alice_token) as tab_a,
                ws_connect(worker_b, "on-b", alice_token) as tab_b,
            ):
                await receive(tab_a)
                await receive(tab_b)
                for worker, session_id in ((worker_a, "on-a"), (worker_b, "on-b")):
                    status, reply = await asyncio.to_thread(
                        http,
                        "POST",
                        f"{worker}/api/sessions/{session_id}/messages/",
                        alice_token,
                        {"text": "what is 6*7?"},
                    )
                    assert (status, reply["status"]) == (200, "completed"), reply
                return await asyncio.to_thread(scrape, worker_a)

        text = asyncio.run(scenario())
        assert sample(text, "jarvis_turns_total", status="completed") == 2
        assert sample(text, "jarvis_ws_connections") == 2
        assert sample(text, "jarvis_model_call_seconds_count") == 4
        # The other worker shows the same sums.
        assert sample(scrape(worker_b), "jarvis_turns_total", status="completed") == 2


def test_a_turns_log_lines_name_it_and_never_quote_the_person(alice_token):
    session_id = f"logged-{uuid.uuid4().hex[:8]}"
    with daphne(serve=True, LOG_FORMAT="json") as server:
        status, reply = http(
            "POST",
            f"{server}/api/sessions/",
            alice_token,
            {"id": session_id},
        )
        assert status == 201, reply
        status, reply = http(
            "POST",
            f"{server}/api/sessions/{session_id}/messages/",
            alice_token,
            {"text": "remember that my favourite colour is periwinkle"},
        )
        assert status == 200, reply
        http_turn = reply["turn_id"]

        async def over_the_socket():
            async with ws_connect(server, session_id, alice_token) as ws:
                await receive(ws)
                await ws.send(json.dumps({"type": "prompt", "text": "what is 17*23? marmalade"}))
                return (await until_agent_end(ws))[-1]["turn_id"]

        socket_turn = asyncio.run(over_the_socket())
        server.process.terminate()
        server.process.wait(RECEIVE_TIMEOUT)
        output = server.output()

    lines = [json.loads(line) for line in output.splitlines() if line.strip()]
    assert "periwinkle" not in output and "marmalade" not in output
    for turn_id in (http_turn, socket_turn):
        ended = [line for line in lines if line.get("turn_id") == turn_id]
        assert any(line["message"] == "turn ended" for line in ended), turn_id
        assert all(line["session_id"] == session_id for line in ended)
        assert all(isinstance(line["user_id"], int) for line in ended)
    requests = [line for line in lines if line["logger"] == "jarvis_site.access"]
    assert any(
        line["path"] == f"/api/sessions/{session_id}/messages/" and line["status"] == 200
        for line in requests
    )
    assert all(line["request_id"] for line in requests)
