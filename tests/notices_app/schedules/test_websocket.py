"""A reminder asked for in the chat arrives on the chat's socket when it is due."""

import asyncio
import threading

import pytest
from channels.db import database_sync_to_async
from django.db import connections
from django.utils import timezone

from notices_app.models import Schedule
from notices_app.services.schedules import schedule_fire
from sessions_app.store import get_store
from tests.helpers import GUARD_SEC
from tests.sessions_app.web.consumers.conftest import (
    RECEIVE_TIMEOUT,
    events_until,
    open_session,
    turn_done,
)

from .conftest import ready_tasks, worker

pytestmark = [pytest.mark.anyio, pytest.mark.django_db(transaction=True)]

sync = database_sync_to_async


@pytest.fixture
def anyio_backend():
    return "asyncio"


@pytest.fixture(autouse=True)
def _fresh_channel_layer():
    from channels.layers import channel_layers

    channel_layers.backends.clear()
    yield
    channel_layers.backends.clear()


@pytest.fixture
def running_worker():
    """`db_worker` polling every 50 ms in a thread, as `make run` runs it beside Daphne."""
    stop = threading.Event()

    def loop():
        try:
            while not stop.is_set():
                worker().run()
                stop.wait(0.05)
        finally:
            connections.close_all()

    thread = threading.Thread(target=loop)
    thread.start()
    yield
    stop.set()
    thread.join(GUARD_SEC)


def notice_of(session_id):
    (notice,) = get_store().get_proactive(session_id)
    return notice


async def test_a_reminder_set_over_the_websocket_arrives_on_time(
    backend, alice_token, running_worker
):
    ws, _ = await open_session("/ws/sessions/chat-ws/", alice_token)
    await ws.send_json_to({"type": "prompt", "text": "remind me in 2 seconds to stretch"})
    events = await events_until(ws, turn_done)
    assert "OK, scheduled #" in "".join(e["text"] for e in events if e["type"] == "delta")
    schedule = await sync(Schedule.objects.get)()
    assert (schedule.session_id, schedule.text) == ("chat-ws", "stretch")

    frame = await ws.receive_json_from(timeout=RECEIVE_TIMEOUT)
    arrived = timezone.now()
    assert frame["type"] == "proactive"
    assert frame["notice"]["content"] == "Reminder: stretch"
    assert frame["notice"]["message_id"] == (
        f"schedule:{schedule.id}:{schedule.first_run_at.isoformat()}"
    )
    # Never early. How late it may be on a loaded machine is not a test's business: the
    # worker polls every 50 ms, and a guard is all a test can put on the rest.
    assert arrived >= schedule.first_run_at

    # The socket that showed it acknowledged it: the notice counts as delivered. The tab
    # marks it right after sending the frame; polled here from the event loop, since a wait
    # in the database thread would keep the tab from marking it.
    deadline = asyncio.get_running_loop().time() + GUARD_SEC
    while (await sync(notice_of)("chat-ws")).delivered_at is None:
        assert asyncio.get_running_loop().time() < deadline, "the tab never acknowledged it"
        await asyncio.sleep(0.05)
    assert await ws.receive_nothing(timeout=1)  # shown once, though it came two ways
    await ws.disconnect()


async def test_a_reminder_cancelled_in_the_chat_never_fires(backend, alice_token):
    ws, _ = await open_session("/ws/sessions/chat-ws/", alice_token)
    await ws.send_json_to({"type": "prompt", "text": "remind me in 5 minutes to stretch"})
    await events_until(ws, turn_done)
    schedule = await sync(Schedule.objects.get)()
    assert len(await sync(ready_tasks)("fire_schedule")) == 1

    await ws.send_json_to({"type": "prompt", "text": "cancel the reminder to stretch"})
    events = await events_until(ws, turn_done)
    assert "Done: cancelled #" in "".join(e["text"] for e in events if e["type"] == "delta")
    assert (await sync(Schedule.objects.get)()).state == "cancelled"
    assert await sync(ready_tasks)("fire_schedule") == []  # the queued run is gone
    fired = await sync(schedule_fire)(schedule_id=schedule.id, run_at=schedule.first_run_at)
    assert fired == "skipped"  # and a run that still started would do nothing
    assert await sync(get_store().get_proactive)("chat-ws") == []
    await ws.disconnect()
