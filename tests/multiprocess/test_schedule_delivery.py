"""Production shape: a reminder asked for on a real Daphne is fired by a separate `db_worker`
process and reaches the socket when due (never early), the webhook once, and nothing outside for a test
session — with the in-memory channel layer (one process: the socket polls) and with Redis
(the worker's broadcast crosses processes)."""

import asyncio
import contextlib
import json
import os
import subprocess
import sys
import tempfile

import pytest
from django.utils import timezone
from websockets.asyncio.client import connect

from notices_app.models import NoticeOutbox, Schedule
from sessions_app.store import get_store
from tests.helpers import GUARD_SEC, REPO, child_env, eventually
from tests.multiprocess.servers import daphne
from tests.notices_app.schedules.conftest import Receiver

pytestmark = pytest.mark.django_db(transaction=True)

RECEIVE_TIMEOUT = GUARD_SEC  # a guard against hanging only
REDIS_URL = os.environ.get("TEST_REDIS_URL", "redis://127.0.0.1:6379/0")


@contextlib.contextmanager
def db_worker(**env):
    log = tempfile.TemporaryFile("w+")
    process = subprocess.Popen(
        [
            sys.executable,
            "manage.py",
            "db_worker",
            "--interval",
            "0.1",
            "--no-startup-delay",
            "--no-reload",
        ],
        cwd=REPO,
        env=child_env(**env),
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        # Up when it says so: a reminder due before the worker polls would be late by the
        # worker's start-up, which is not what this test measures.
        def started():
            assert process.poll() is None, "the worker exited"
            log.seek(0)
            return "Starting worker" in log.read()

        if not eventually(started, what="the worker says it started", fail=False):
            log.seek(0)
            printed = log.read()[-3000:] or "(nothing)"
            raise AssertionError(f"the worker did not say it started; it printed: {printed}")
        yield process
    finally:
        process.terminate()
        try:
            process.wait(timeout=GUARD_SEC)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=GUARD_SEC)
        log.close()


async def receive(ws):
    return json.loads(await asyncio.wait_for(ws.recv(), RECEIVE_TIMEOUT))


async def remind(base, token, session_id):
    """Ask for a reminder in 2 seconds over the socket; return the `proactive` frame and the
    time it arrived."""
    host = base.removeprefix("http://")
    async with connect(
        f"ws://{host}/ws/sessions/{session_id}/",
        origin=base,
        additional_headers={"Authorization": f"Token {token}"},
        open_timeout=RECEIVE_TIMEOUT,
    ) as ws:
        assert (await receive(ws))["type"] == "session"
        await ws.send(json.dumps({"type": "prompt", "text": "remind me in 2 seconds to stretch"}))
        while (event := await receive(ws))["type"] != "agent_end":
            pass
        while (event := await receive(ws))["type"] != "proactive":
            pass
        return event["notice"], timezone.now()


@pytest.mark.parametrize("backend, layer", [("db", "redis"), ("jsonl", "in-memory")])
def test_a_reminder_reaches_the_socket_on_time_and_the_webhook_once(
    backend, layer, settings, alice_token
):
    settings.JARVIS_SESSION__PERSISTENCE_BACKEND = backend
    get_store.cache_clear()
    receiver = Receiver()
    env = {
        "NOTIFY_WEBHOOK_URL": receiver.url,
        # The receiver is plain http on loopback: named with its port, so it may be private.
        "OUTBOUND_ALLOW_HTTP": "true",
        "OUTBOUND_URL_ALLOWLIST": receiver.host,
        "JARVIS_SESSION__PERSISTENCE_BACKEND": backend,
        **({"REDIS_URL": REDIS_URL} if layer == "redis" else {}),
    }
    try:
        with daphne(**env) as base, db_worker(**env):
            for session_id in ["test-e2e", "chat-e2e"]:
                notice, arrived = asyncio.run(remind(base, alice_token, session_id))
                schedule = Schedule.objects.get(session_id=session_id)
                assert notice["content"] == "Reminder: stretch"
                assert notice["message_id"].startswith(f"schedule:{schedule.id}:")
                # Never early. How late three processes on a loaded two-core machine deliver
                # it is not something a test can promise; the receive timeout guards it.
                assert schedule.first_run_at <= arrived
            eventually(lambda: receiver.posts, what="the webhook got a POST")
            eventually(
                lambda: NoticeOutbox.objects.filter(state="sent").exists(),
                what="the outbox row is sent",
            )
    finally:
        receiver.close()
    # One POST, for the real conversation; the test session's notice never left.
    assert [post["body"]["session_id"] for post in receiver.posts] == ["chat-e2e"]
    for session_id in ["test-e2e", "chat-e2e"]:
        (stored,) = get_store().get_proactive(session_id)
        assert stored.delivered_at is not None
