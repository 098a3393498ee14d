"""Control before data on the live bus (docs/design.md §26): a Stop sent from another worker
reaches the turn's worker while that worker is still behind on the events it follows — asks
and aborts travel on a Redis connection of their own, never queued behind the data."""

import asyncio
import uuid

import pytest

from sessions_app.runtime import live_bus
from tests.helpers import GUARD_SEC
from tests.multiprocess.redis_layer import TEST_REDIS_URL, requires_redis

pytestmark = [pytest.mark.anyio, requires_redis]

QUEUED_EVENTS = 200


async def _closed(bus: live_bus.LiveBus) -> None:
    for task in [bus.publisher, bus.reply_ready, *bus.readers.values()]:
        task.cancel()
    await asyncio.gather(bus.publisher, *bus.readers.values(), return_exceptions=True)
    for client in (bus.redis, bus.pubsub, bus.control_pubsub):
        await client.aclose()


async def test_an_abort_overtakes_the_events_a_busy_worker_has_not_read(settings, monkeypatch):
    settings.REDIS_URL = TEST_REDIS_URL
    run = uuid.uuid4().hex[:8]
    followed, running = f"data-{run}", f"turn-{run}"
    reading, release, aborted = asyncio.Event(), asyncio.Event(), asyncio.Event()
    delivered: list[int] = []

    async def on_event(session_id, turn_id, event_seq, text):
        delivered.append(event_seq)
        reading.set()
        await release.wait()  # the worker is busy with the first event it got

    monkeypatch.setitem(live_bus._handlers, "on_event", on_event)
    monkeypatch.setitem(live_bus._handlers, "on_abort", lambda session_id: aborted.set())
    monkeypatch.setitem(live_bus._handlers, "on_ask", lambda session_id: None)

    worker = live_bus.LiveBus(TEST_REDIS_URL)  # runs one turn, follows another's
    other = live_bus.LiveBus(TEST_REDIS_URL)  # streams the followed turn, sends the Stop
    try:
        await worker.follow(followed)
        await worker.turn_started(running)
        for seq in range(1, QUEUED_EVENTS + 1):
            other.publish_event(followed, "t1", seq, f'{{"type":"delta","event_seq":{seq}}}')
        async with asyncio.timeout(GUARD_SEC):
            await reading.wait()
        # Every other event waits behind the first one's delivery; the Stop does not.
        assert await other.abort(running)
        async with asyncio.timeout(GUARD_SEC):
            await aborted.wait()
        assert delivered == [1]
        release.set()
    finally:
        release.set()
        await _closed(worker)
        await _closed(other)
