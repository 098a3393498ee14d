"""Control before data on the live bus (docs/design.md §26): a Stop sent from another worker
reaches the turn's worker while that worker is still behind on the events it follows — asks
and aborts travel on a Redis connection of their own, never queued behind the data."""

import asyncio
import contextlib
import threading
import uuid

import pytest

from sessions_app.runtime.live import live_bus
from tests.helpers import GUARD_SEC
from tests.multiprocess.redis_layer import TEST_REDIS_URL, requires_redis

pytestmark = [pytest.mark.anyio, requires_redis]

QUEUED_EVENTS = 200


async def started(bus: live_bus.LiveBus, session_id: str) -> None:
    """The turn runs on `bus`'s worker, and that worker has confirmed its control channel."""
    bus.turn_started(session_id)
    await bus.subscribed[live_bus.control_channel(session_id)]


async def _closed(bus: live_bus.LiveBus) -> None:
    tasks = [bus.publisher, bus.replier, bus.events_delivery, bus.reply_ready]
    tasks = [task for task in tasks if task is not None]
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    await bus.redis.aclose()
    bus.control_line.close()
    bus.events_line.close()


@contextlib.contextmanager
def line_paused(line):
    """The control line's thread held in a callback of its loop until the block ends."""
    holding, release = threading.Event(), threading.Event()

    def hold():
        holding.set()
        release.wait(GUARD_SEC)

    line._loop.call_soon_threadsafe(hold)
    assert holding.wait(GUARD_SEC)
    try:
        yield
    finally:
        release.set()


def on_this_loop(callback):
    """`callback` run on the test's event loop, whichever thread calls it: a Stop is handed
    over by the worker's control line, a thread (runtime/control_line.py)."""
    loop = asyncio.get_running_loop()
    return lambda *args: loop.call_soon_threadsafe(callback, *args)


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
    monkeypatch.setitem(live_bus._handlers, "on_abort", on_this_loop(lambda _: aborted.set()))
    monkeypatch.setitem(live_bus._handlers, "on_ask", lambda session_id: None)

    worker = live_bus.LiveBus(TEST_REDIS_URL)  # runs one turn, follows another's
    other = live_bus.LiveBus(TEST_REDIS_URL)  # streams the followed turn, sends the Stop
    try:
        await worker.follow(followed)
        await started(worker, running)
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


async def test_a_starting_turn_listens_early_and_a_refused_one_leaves_a_running_turn_alone(
    settings, monkeypatch
):
    settings.REDIS_URL = TEST_REDIS_URL
    run = uuid.uuid4().hex[:8]
    starting, running = f"starting-{run}", f"running-{run}"
    stopped: list[str] = []
    monkeypatch.setitem(live_bus._handlers, "on_abort", on_this_loop(stopped.append))
    monkeypatch.setitem(live_bus._handlers, "on_ask", lambda session_id: None)
    worker = live_bus.LiveBus(TEST_REDIS_URL)
    other = live_bus.LiveBus(TEST_REDIS_URL)
    try:
        async with asyncio.timeout(GUARD_SEC):
            # While it takes its lease, the turn already hears a Stop from another worker.
            worker.turn_starting(starting)
            await worker.subscribed[live_bus.control_channel(starting)]
            assert await other.abort(starting)
            await started(worker, starting)  # already subscribed: no second SUBSCRIBE

            # A second prompt of a session whose turn runs here is refused (busy): the
            # running turn keeps its control channel.
            await started(worker, running)
            worker.turn_starting(running)
            await worker.turn_not_started(running)
            assert await other.abort(running)
            while len(stopped) < 2:
                await asyncio.sleep(0)  # the worker's reader hands the aborts over
        assert sorted(stopped) == sorted([starting, running])  # each heard once
    finally:
        await _closed(worker)
        await _closed(other)


async def test_turns_that_start_at_once_subscribe_together_and_each_hears_its_stop(
    settings, monkeypatch
):
    # Under a burst hundreds of turns start in the same moment. Each used to send its own
    # SUBSCRIBE after waiting for the one before it at a lock, one pass of a busy event loop
    # per turn: seconds before a turn's first event could leave. What the control line's
    # thread finds queued when it wakes goes out together.
    settings.REDIS_URL = TEST_REDIS_URL
    run = uuid.uuid4().hex[:8]
    sessions = [f"burst-{run}-{index}" for index in range(QUEUED_EVENTS)]
    stopped: set[str] = set()
    all_stopped = asyncio.Event()

    def on_abort(session_id):
        stopped.add(session_id)
        if len(stopped) == len(sessions):
            all_stopped.set()

    monkeypatch.setitem(live_bus._handlers, "on_abort", on_this_loop(on_abort))
    monkeypatch.setitem(live_bus._handlers, "on_ask", lambda session_id: None)
    worker = live_bus.LiveBus(TEST_REDIS_URL)
    other = live_bus.LiveBus(TEST_REDIS_URL)
    sent: list[tuple] = []
    send_command = worker.control_line.pubsub.execute_command

    async def counted(*args):  # on the control line's thread
        sent.append(args)
        return await send_command(*args)

    monkeypatch.setattr(worker.control_line.pubsub, "execute_command", counted)
    try:
        async with asyncio.timeout(GUARD_SEC):
            await worker.reply_ready
            with line_paused(worker.control_line):  # busy: the burst queues meanwhile
                for session in sessions:
                    worker.turn_started(session)
            await asyncio.gather(*(started(worker, session) for session in sessions))
        subscribes = [args for args in sent if args[0] == "SUBSCRIBE"]
        assert len(subscribes) <= 2, f"{len(subscribes)} SUBSCRIBE commands for one burst"
        subscribed = [c for args in subscribes for c in args[1:] if c.endswith(":control")]
        assert sorted(subscribed) == sorted(
            live_bus.control_channel(session) for session in sessions
        )
        # Every turn listens: a Stop from the other worker reaches each one.
        for session in sessions:
            assert await other.abort(session), session
        async with asyncio.timeout(GUARD_SEC):
            await all_stopped.wait()
        assert stopped == set(sessions)
    finally:
        await _closed(worker)
        await _closed(other)


async def test_a_turns_events_wait_for_its_control_channel_not_its_start(settings, monkeypatch):
    # A turn's first event used to wait for its control channel's SUBSCRIBE to be confirmed,
    # a Redis round trip read on a busy loop, and every later event (a Stop's agent_end
    # among them) waited behind it, for this worker's own sockets too. Now only the
    # publishes wait: an asker that found nobody had subscribed to the events before it
    # asked, so it still gets every one.
    settings.REDIS_URL = TEST_REDIS_URL
    session = f"held-{uuid.uuid4().hex[:8]}"
    delivered: list[int] = []  # on the other worker

    async def on_event(session_id, turn_id, event_seq, text):
        delivered.append(event_seq)

    monkeypatch.setitem(live_bus._handlers, "on_event", on_event)
    monkeypatch.setitem(live_bus._handlers, "on_ask", lambda session_id: None)
    worker = live_bus.LiveBus(TEST_REDIS_URL)
    other = live_bus.LiveBus(TEST_REDIS_URL)
    confirm = threading.Event()
    subscribe = worker.control_line.pubsub.subscribe

    async def confirmed_later(*channels):  # on the control line's thread
        await asyncio.to_thread(confirm.wait)  # Redis has not answered yet
        return await subscribe(*channels)

    try:
        async with asyncio.timeout(GUARD_SEC):
            await worker.reply_ready  # (its answers' channel: subscribed as usual)
            monkeypatch.setattr(worker.control_line.pubsub, "subscribe", confirmed_later)
            await other.follow(session)
            assert await other.ask(session) is None  # nobody runs it yet
            worker.turn_started(session)  # returns at once: nothing to wait for
            for seq in (1, 2):
                worker.publish_event(session, "turn_1", seq, _delta(seq))
            for _ in range(20):
                await asyncio.sleep(0)
            assert worker.published == 0 and delivered == []  # held, not lost

            confirm.set()
            end = '{"type": "agent_end", "status": "aborted", "event_seq": 3}'
            worker.publish_event(session, "turn_1", 3, end)
            await worker.turn_ended(session)  # publishes what is held, then lets go
            while len(delivered) < 3:
                await asyncio.sleep(0)
        assert delivered == [1, 2, 3]
    finally:
        confirm.set()
        await _closed(worker)
        await _closed(other)


def _delta(seq: int) -> str:
    return f'{{"type": "delta", "text": "x", "event_seq": {seq}}}'
