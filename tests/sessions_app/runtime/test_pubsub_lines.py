"""A worker's live-bus connections are read on threads of their own (docs/design.md §26): a
Stop from another worker reaches the turn while the turn's worker is busy, and the rest of
what they read (a turn's subscription confirmed, asks, answers, followed events) reaches the
worker's loop ahead of its waiting work, in the order it arrived."""

import asyncio
import threading
import uuid

import pytest
import redis

from sessions_app.runtime.live import live_bus
from sessions_app.runtime.loop.eager import start_task
from tests.helpers import GUARD_SEC
from tests.multiprocess.redis_layer import TEST_REDIS_URL, requires_redis
from tests.sessions_app.runtime.test_live_bus_control_lane import _closed, line_paused, started

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


@pytest.fixture
def stops(settings, monkeypatch):
    settings.REDIS_URL = TEST_REDIS_URL
    heard = Stops()
    monkeypatch.setitem(live_bus._handlers, "on_abort", heard)
    monkeypatch.setitem(live_bus._handlers, "on_ask", lambda session_id: {"running": True})
    return heard


async def test_a_stop_reaches_the_turn_while_its_workers_event_loop_is_blocked(stops):
    session = f"blocked-{uuid.uuid4().hex[:8]}"
    worker = live_bus.LiveBus(TEST_REDIS_URL)  # runs the turn
    other = live_bus.LiveBus(TEST_REDIS_URL)  # the Stop was pressed on a socket here
    try:
        async with asyncio.timeout(GUARD_SEC):
            await started(worker, session)
            # Its connection is open (a first Stop waits for it to connect).
            assert not await other.abort(f"warm-up-{session}")
        stop = start_task(other.abort(session))  # on the wire before this step ends
        # The loop is blocked from here on: only the control line can hand the Stop over.
        assert stops.first.wait(GUARD_SEC), "the Stop waited for the worker's event loop"
        async with asyncio.timeout(GUARD_SEC):
            assert await stop
            # The worker's loop still answers an ask from the line's thread.
            assert await other.ask(session) == {"running": True}
        assert stops.heard == [(session, "live-bus-control")]
    finally:
        await _closed(worker)
        await _closed(other)


async def test_a_turns_held_events_leave_in_the_callback_that_confirms_its_channel(stops):
    # Not in the confirmation future's own callback, a pass of the loop later.
    session = f"confirmed-{uuid.uuid4().hex[:8]}"
    worker = live_bus.LiveBus(TEST_REDIS_URL)
    try:
        async with asyncio.timeout(GUARD_SEC):
            await worker.reply_ready
            worker.turn_started(session)
            worker.publish_event(session, "turn_1", 1, '{"type": "delta", "event_seq": 1}')
            confirmed = worker.subscribed[live_bus.control_channel(session)]
            published_when_confirmed = []
            confirmed.add_done_callback(lambda _: published_when_confirmed.append(worker.published))
            await confirmed
            await asyncio.sleep(0)  # the future's callbacks have run
        assert published_when_confirmed == [1]  # released by the time its callbacks ran
    finally:
        await _closed(worker)


async def test_a_turn_that_ended_leaves_its_control_channel_and_a_late_stop_reaches_nobody(
    stops,
):
    session = f"ended-{uuid.uuid4().hex[:8]}"
    worker = live_bus.LiveBus(TEST_REDIS_URL)
    other = live_bus.LiveBus(TEST_REDIS_URL)
    client = redis.Redis.from_url(TEST_REDIS_URL)
    try:
        async with asyncio.timeout(GUARD_SEC):
            await started(worker, session)
            await worker.turn_ended(session)
            channel = live_bus.control_channel(session)
            while worker.leaving.get(channel):
                await asyncio.sleep(0)  # until Redis confirmed the UNSUBSCRIBE
            assert client.pubsub_numsub(channel) == [(channel.encode(), 0)]
            assert not await other.abort(session)
        assert stops.heard == []
    finally:
        client.close()
        await _closed(worker)
        await _closed(other)


async def test_followed_events_arrive_in_order_though_a_delivery_waits(settings, monkeypatch):
    settings.REDIS_URL = TEST_REDIS_URL
    session = f"ordered-{uuid.uuid4().hex[:8]}"
    delivered: list[int] = []
    first_waits, release = asyncio.Event(), asyncio.Event()

    async def on_event(session_id, turn_id, event_seq, text):
        delivered.append(event_seq)
        if event_seq == 1:
            first_waits.set()
            await release.wait()  # a socket slow to take the first one

    monkeypatch.setitem(live_bus._handlers, "on_event", on_event)
    worker = live_bus.LiveBus(TEST_REDIS_URL)  # a tab here follows the turn
    other = live_bus.LiveBus(TEST_REDIS_URL)  # runs it
    try:
        async with asyncio.timeout(GUARD_SEC):
            await worker.follow(session)
            for seq in range(1, 51):
                other.publish_event(session, "turn_1", seq, f'{{"type":"delta","event_seq":{seq}}}')
            await first_waits.wait()
            while len(worker.events_due) < 49:
                await asyncio.sleep(0)  # the rest arrived meanwhile, and waits its turn
            assert delivered == [1]
            release.set()
            while len(delivered) < 50:
                await asyncio.sleep(0)
        assert delivered == list(range(1, 51))
    finally:
        release.set()
        await _closed(worker)
        await _closed(other)


async def test_more_tabs_join_at_once_than_the_redis_pool_has_connections(stops):
    # A reload storm: every tab that reconnects to the other worker asks for its turn's state.
    # Each ask held a pool connection until Redis counted it, and the pool has 100.
    sessions = [f"join-{uuid.uuid4().hex[:8]}-{index}" for index in range(150)]
    worker = live_bus.LiveBus(TEST_REDIS_URL)  # runs the turns
    other = live_bus.LiveBus(TEST_REDIS_URL)  # the tabs join here
    assert other.redis.connection_pool.max_connections < len(sessions)
    try:
        async with asyncio.timeout(GUARD_SEC):
            with line_paused(worker.control_line):  # the burst's subscriptions go together
                for session in sessions:
                    worker.turn_started(session)
            await asyncio.gather(*(started(worker, session) for session in sessions))
            answers = await asyncio.gather(*(other.ask(session) for session in sessions))
        assert answers == [{"running": True}] * len(sessions)
    finally:
        await _closed(worker)
        await _closed(other)


async def test_events_handed_over_twice_in_one_pass_are_all_delivered(settings, monkeypatch):
    # The first hand-over's delivery task did all its work in its first step, but was not
    # done until the loop ran its last one: the second hand-over waited for a next message,
    # and a turn's last event (its agent_end) for ever.
    settings.REDIS_URL = TEST_REDIS_URL
    delivered: list[int] = []

    async def on_event(session_id, turn_id, event_seq, text):
        delivered.append(event_seq)  # a socket that takes it at once

    def event(seq: int) -> dict:
        data = f"another-worker\nturn_1\n{seq}\n{{}}".encode()
        return {"type": "message", "channel": live_bus.events_channel("s").encode(), "data": data}

    monkeypatch.setitem(live_bus._handlers, "on_event", on_event)
    bus = live_bus.LiveBus(TEST_REDIS_URL)
    try:
        for seq in (1, 2):  # two callbacks of the line in one pass of the loop
            bus.inbox.append(("event", event(seq)))
            bus.inbox_empty()
        assert delivered == [1, 2]
    finally:
        await _closed(bus)
