"""Real Daphne workers on one PostgreSQL database: a delete on one worker stops a turn running
on another, and a worker that dies stops blocking deletes and turns within WORKER_DEAD_SEC."""

import json
import threading
import urllib.error
import urllib.request
import uuid
from datetime import timedelta

import pytest
from django.utils import timezone

from memory_app.models import Episode, WorkingMemory
from sessions_app.models import LiveConnection, Worker
from sessions_app.services import deletion
from sessions_app.store import connections, get_store
from tests.conftest import requires_postgres
from tests.helpers import GUARD_SEC, eventually
from tests.multiprocess.servers import daphne
from tests.multiprocess.test_live_connections import receive, ws_connect

pytestmark = [requires_postgres, pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def http(method, url, token, body=None):
    request = urllib.request.Request(
        url,
        method=method,
        data=None if body is None else json.dumps(body).encode(),
        headers={
            "Authorization": f"Token {token}",
            "Accept": "application/json",
            "Content-Type": "application/json",
        },
    )
    try:
        with urllib.request.urlopen(request, timeout=GUARD_SEC) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def test_delete_on_one_worker_stops_an_http_turn_on_another_and_the_id_starts_clean(
    alice_token, bob_token
):
    alice, bob = alice_token, bob_token
    session_id = f"mp-{uuid.uuid4().hex[:8]}"
    with daphne() as worker_a, daphne() as worker_b:
        assert http("POST", f"{worker_a}/api/sessions/", alice, {"id": session_id})[0] == 201
        answer = {}
        turn = threading.Thread(
            target=lambda: answer.update(
                reply=http(
                    "POST",
                    f"{worker_a}/api/sessions/{session_id}/messages/",
                    alice,
                    {"text": "remember that my pin is 4242 and wait 30 seconds"},
                )
            )
        )
        turn.start()
        eventually(
            lambda: any(e.tool_calls for e in get_store().get_messages(session_id)),
            what="the turn's tool calls are stored",
        )
        status, body = http("DELETE", f"{worker_b}/api/sessions/{session_id}/", alice)
        assert (status, body) == (200, {"deleted": True, "exports": []})
        turn.join(GUARD_SEC)
        status, reply = answer["reply"]
        assert status == 200 and reply["status"] == "aborted", reply

        assert http("POST", f"{worker_b}/api/sessions/", bob, {"id": session_id})[0] == 201
        status, body = http("GET", f"{worker_a}/api/sessions/{session_id}/entries/", bob)
        assert status == 200 and body["entries"] == []
    assert not Episode.objects.filter(session_id=session_id).exists()
    assert not WorkingMemory.objects.filter(session_id=session_id).exists()


def test_a_killed_worker_stops_blocking_delete_once_it_is_silent(alice_token):
    alice = alice_token
    session_id = f"mp-{uuid.uuid4().hex[:8]}"
    with daphne() as worker:
        import asyncio

        async def attach():
            ws = await ws_connect(worker, session_id, alice)
            assert (await receive(ws))["type"] == "session"
            return ws

        loop = asyncio.new_event_loop()
        try:
            loop.run_until_complete(attach())
            row = LiveConnection.objects.get(session_id=session_id)
            assert Worker.objects.filter(id=row.worker_id).exists(), "the worker heartbeats"
            owner = row.user_id
            with pytest.raises(deletion.SessionConnected):
                deletion.session_delete(session_id=session_id, owner_id=owner)

            worker.process.kill()  # no disconnect, no cleanup: the socket's row stays
            worker.process.wait(GUARD_SEC)
            # The dead worker cannot renew its heartbeat; let WORKER_DEAD_SEC pass for it.
            Worker.objects.filter(id=row.worker_id).update(
                heartbeat_at=timezone.now() - timedelta(seconds=60)
            )
            # The connection row itself is still fresh: only the worker's silence frees it.
            assert LiveConnection.objects.get(pk=row.pk).heartbeat_at > timezone.now() - timedelta(
                seconds=connections.LIVE_TIMEOUT_SEC
            )
            assert deletion.session_delete(session_id=session_id, owner_id=owner) is True
        finally:
            loop.close()
