"""No work for events nobody listens to (docs/design.md §26): a turn that no other worker
follows stops publishing its events to Redis, and starts again, missing nothing, as soon as
a socket of its session joins another worker (which asks for the running state)."""

import asyncio
import json
import threading
import uuid

import pytest

from sessions_app.core import frames
from sessions_app.runtime.live import live_bus
from tests.helpers import GUARD_SEC
from tests.multiprocess.redis_layer import TEST_REDIS_URL, requires_redis
from tests.sessions_app.runtime.test_live_bus_control_lane import _closed, started

pytestmark = [pytest.mark.anyio, requires_redis]


def delta(seq: int) -> str:
    return json.dumps({"type": "delta", "text": "x", "event_seq": seq})


def delivered_here(monkeypatch) -> list[int]:
    """The event_seqs the buses hand to their worker's sockets, as they arrive; no turn of
    these tests answers an ask."""
    delivered: list[int] = []

    async def on_event(session_id, turn_id, event_seq, text):
        delivered.append(event_seq)

    monkeypatch.setitem(live_bus._handlers, "on_event", on_event)
    monkeypatch.setitem(live_bus._handlers, "on_ask", lambda session_id: None)
    return delivered


async def until(condition) -> None:
    async with asyncio.timeout(GUARD_SEC):
        while not condition():
            await asyncio.sleep(0)  # the buses' tasks run: the publish's answer, a delivery


async def test_a_turn_nobody_follows_publishes_nothing_until_a_worker_asks(settings, monkeypatch):
    settings.REDIS_URL = TEST_REDIS_URL
    session, turn = f"unheard-{uuid.uuid4().hex[:8]}", "turn_1"
    delivered: list[int] = []

    async def on_event(session_id, turn_id, event_seq, text):
        delivered.append(event_seq)

    monkeypatch.setitem(live_bus._handlers, "on_event", on_event)
    monkeypatch.setitem(
        live_bus._handlers, "on_ask", lambda session_id: {"turn_id": turn, "event_seq": 2}
    )
    worker = live_bus.LiveBus(TEST_REDIS_URL)  # runs the turn
    other = live_bus.LiveBus(TEST_REDIS_URL)  # a tab of the session joins it later
    try:
        await started(worker, session)
        worker.publish_event(session, turn, 1, delta(1))
        await until(lambda: session in worker.unheard)  # Redis said: no worker got it
        worker.publish_event(session, turn, 2, delta(2))
        assert worker.published == 1 and worker.outbox == []

        # A socket joins the other worker: it subscribes, then asks for the running state.
        await other.follow(session)
        assert await other.ask(session) == {"turn_id": turn, "event_seq": 2}
        worker.publish_event(session, turn, 3, delta(3))
        await until(lambda: delivered == [3])
        assert session not in worker.unheard

        # The tab leaves; later the other worker's subscription comes back without an ask
        # (as after a reconnect to Redis): the deltas stay home, the turn's end does not.
        await other.unfollow(session)
        async with asyncio.timeout(GUARD_SEC):
            channel = live_bus.events_channel(session)
            while (await worker.redis.pubsub_numsub(channel))[0][1]:
                await asyncio.sleep(0)  # Redis has not processed the UNSUBSCRIBE yet
        worker.publish_event(session, turn, 4, delta(4))
        await until(lambda: session in worker.unheard)
        await other.follow(session)
        worker.publish_event(session, turn, 5, delta(5))
        end = frames.frame_text({"type": "agent_end", "status": "completed", "event_seq": 6})
        worker.publish_event(session, turn, 6, end)
        await until(lambda: delivered[-1] == 6)
        assert delivered == [3, 6]
    finally:
        await _closed(worker)
        await _closed(other)


async def test_a_worker_following_before_the_turn_started_gets_every_event(settings, monkeypatch):
    settings.REDIS_URL = TEST_REDIS_URL
    session = f"heard-{uuid.uuid4().hex[:8]}"
    delivered = delivered_here(monkeypatch)
    worker = live_bus.LiveBus(TEST_REDIS_URL)
    other = live_bus.LiveBus(TEST_REDIS_URL)
    try:
        # A tab on the other worker, open before the turn (sent from this worker) starts.
        await other.follow(session)
        await started(worker, session)
        for seq in range(1, 6):
            worker.publish_event(session, "turn_1", seq, delta(seq))
        await until(lambda: len(delivered) == 5)
        assert delivered == [1, 2, 3, 4, 5] and session not in worker.unheard
    finally:
        await _closed(worker)
        await _closed(other)


@pytest.mark.parametrize("others_follow", [False, True])
async def test_the_runners_own_subscription_is_no_listener(settings, monkeypatch, others_follow):
    # A tab of the session on the runner's worker followed it until the turn started: Redis
    # sends the first events back to the runner until its UNSUBSCRIBE is done. Those copies
    # are not another worker listening; a tab on another worker is.
    settings.REDIS_URL = TEST_REDIS_URL
    session = f"echo-{uuid.uuid4().hex[:8]}"
    delivered = delivered_here(monkeypatch)
    worker = live_bus.LiveBus(TEST_REDIS_URL)
    other = live_bus.LiveBus(TEST_REDIS_URL)
    judged: list[int] = []
    judge = worker._judge
    monkeypatch.setattr(worker, "_judge", lambda *args: (judged.append(args[1]), judge(*args)))
    # The test holds the runner's UNSUBSCRIBE until its three publishes have been counted.
    counted = threading.Event()
    unsubscribe = worker.events_line.pubsub.unsubscribe

    async def held_unsubscribe(*channels):  # on the events line's thread
        await asyncio.to_thread(counted.wait)
        return await unsubscribe(*channels)

    monkeypatch.setattr(worker.events_line.pubsub, "unsubscribe", held_unsubscribe)
    try:
        await worker.follow(session)
        if others_follow:
            await other.follow(session)
        await started(worker, session)
        for seq in (1, 2, 3):
            worker.publish_event(session, "turn_1", seq, delta(seq))
        # Each count includes the runner, which gets its copies back: judged only later.
        await until(lambda: len(worker.echoes.get(session, ())) == 3)
        await until(lambda: len(worker.unjudged.get(session, ())) == 3)
        assert judged == [] and session not in worker.unheard
        counted.set()
        await until(lambda: len(judged) == 3)
        assert worker.leaving == {}
        if others_follow:
            await until(lambda: delivered == [1, 2, 3])
            assert session not in worker.unheard
        else:
            assert session in worker.unheard
            assert delivered == []  # the runner's own copies never reach its sockets twice
    finally:
        counted.set()
        await _closed(worker)
        await _closed(other)
