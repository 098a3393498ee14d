"""A Stop from another worker reaches the turn while the turn's worker is busy (docs/design.md
§26): its stop line, a thread with a Redis connection of its own, hears it without waiting for
the worker's event loop; the control channel's copy is the way that never misses, and a Stop
is acted on once, whichever way arrives first."""

import asyncio
import threading
import uuid

import pytest
import redis

from sessions_app.runtime import live_bus, stop_line
from sessions_app.runtime.eager import start_task
from tests.helpers import GUARD_SEC
from tests.multiprocess.redis_layer import TEST_REDIS_URL, requires_redis
from tests.sessions_app.runtime.test_live_bus_control_lane import _closed, started

pytestmark = [pytest.mark.anyio, requires_redis]


class Stops:
    """The Stops a worker acted on, with the thread that acted: a threading.Event, because
    the test blocks its own event loop while it waits."""

    def __init__(self):
        self.heard: list[tuple[str, str]] = []
        self.first = threading.Event()

    def __call__(self, session_id: str) -> None:
        self.heard.append((session_id, threading.current_thread().name))
        self.first.set()


def line_listens(session_id: str) -> None:
    """Until the stop line's subscription to the session is in place (Redis says so)."""
    client = redis.Redis.from_url(TEST_REDIS_URL)
    try:
        channel = live_bus.stop_channel(session_id)
        for _ in range(int(GUARD_SEC / 0.01)):
            if dict(client.pubsub_numsub(channel))[channel.encode()]:
                return
            threading.Event().wait(0.01)
        raise AssertionError("the stop line never subscribed")
    finally:
        client.close()


@pytest.fixture
def handlers(settings, monkeypatch):
    settings.REDIS_URL = TEST_REDIS_URL
    stops = Stops()
    monkeypatch.setitem(live_bus._handlers, "on_abort", stops)
    monkeypatch.setitem(live_bus._handlers, "on_ask", lambda session_id: {"running": True})
    return stops


async def test_a_stop_reaches_the_turn_while_its_workers_event_loop_is_blocked(handlers):
    session = f"blocked-{uuid.uuid4().hex[:8]}"
    worker = live_bus.LiveBus(TEST_REDIS_URL)  # runs the turn
    other = live_bus.LiveBus(TEST_REDIS_URL)  # the Stop was pressed on a socket here
    try:
        async with asyncio.timeout(GUARD_SEC):
            await started(worker, session)
            # Its connections are open (a first Stop waits for them to connect).
            assert not await other.abort(f"warm-up-{session}")
        line_listens(session)
        stop = start_task(other.abort(session))  # on the wire before this step ends
        # The loop is blocked from here on: only the stop line can hand the Stop over.
        assert handlers.first.wait(GUARD_SEC), "the Stop waited for the worker's event loop"
        async with asyncio.timeout(GUARD_SEC):
            assert await stop
            # An ask after it is answered once the loop has read the Stop's other copy.
            assert await other.ask(session) == {"running": True}
        assert handlers.heard == [(session, "live-bus-stops")]  # acted on once
    finally:
        await _closed(worker)
        await _closed(other)


async def test_a_stop_the_line_does_not_hear_arrives_by_the_control_channel(handlers, monkeypatch):
    # A turn just starting (the line's subscription on its way), or a line reconnecting.
    monkeypatch.setattr(stop_line.StopLine, "listen", lambda line, channel: None)
    session = f"unheard-{uuid.uuid4().hex[:8]}"
    worker = live_bus.LiveBus(TEST_REDIS_URL)
    other = live_bus.LiveBus(TEST_REDIS_URL)
    try:
        async with asyncio.timeout(GUARD_SEC):
            await started(worker, session)
            assert await other.abort(session)
            while not handlers.heard:
                await asyncio.sleep(0)  # the worker's control reader hands it over
        assert handlers.heard == [(session, threading.current_thread().name)]
    finally:
        await _closed(worker)
        await _closed(other)


async def test_a_turn_that_ended_leaves_the_line_and_a_late_stop_reaches_nobody(handlers):
    session = f"ended-{uuid.uuid4().hex[:8]}"
    worker = live_bus.LiveBus(TEST_REDIS_URL)
    other = live_bus.LiveBus(TEST_REDIS_URL)
    try:
        async with asyncio.timeout(GUARD_SEC):
            await started(worker, session)
            line_listens(session)
            await worker.turn_ended(session)
            while worker.subscribed.get(live_bus.control_channel(session)):
                await asyncio.sleep(0)
        client = redis.Redis.from_url(TEST_REDIS_URL)
        try:
            for _ in range(int(GUARD_SEC / 0.01)):  # the line's UNSUBSCRIBE is on its way
                if not client.pubsub_numsub(live_bus.stop_channel(session))[0][1]:
                    break
                await asyncio.sleep(0.01)
        finally:
            client.close()
        async with asyncio.timeout(GUARD_SEC):
            assert not await other.abort(session)
        assert handlers.heard == []
    finally:
        await _closed(worker)
        await _closed(other)


def test_each_stop_is_acted_on_once_and_old_ones_are_forgotten():
    heard = stop_line.HeardStops(size=2)
    assert heard.first_to_hear("a") and not heard.first_to_hear("a")
    assert heard.first_to_hear("b") and heard.first_to_hear("c")
    assert heard.first_to_hear("a")  # forgotten: only the last two are kept
    assert heard.first_to_hear(None) and heard.first_to_hear(None)  # an older worker's Stop
