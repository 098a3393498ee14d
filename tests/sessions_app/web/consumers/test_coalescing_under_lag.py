"""While the worker's event loop runs late, a turn's streamed text leaves in fewer, larger
pieces (bounded), the tabs see the same text, and `event_seq` has no gap (docs/design.md §26)."""

import json

import pytest
from channels.db import database_sync_to_async

from sessions_app.runtime.live import live
from sessions_app.runtime.loop import loop_lag
from sessions_app.services import broadcasts
from sessions_app.store import get_store

from .test_edges import StepClock

pytestmark = [pytest.mark.anyio, pytest.mark.django_db(transaction=True)]


async def stream(monkeypatch, *, lag: float, pieces: int, step: float) -> list[dict]:
    """One turn's events as a tab of its session receives them: `pieces` deltas `step`
    seconds apart on the turn's clock, while the loop runs `lag` seconds late."""
    monkeypatch.setattr(loop_lag, "current", lambda: lag)
    await database_sync_to_async(get_store().create)("s1")
    sent: list[dict] = []

    async def record(text):
        sent.append(json.loads(text))

    socket = live.LiveSocket("s1", record)
    await live.socket_join(socket)
    await socket.go_live(None)
    clock = StepClock()
    on_event = broadcasts.turn_event_broadcaster("s1", clock=clock)
    await on_event({"type": "agent_start", "turn_id": "t1"})
    for index in range(pieces):
        await on_event({"type": "delta", "turn_id": "t1", "text": f"{index},"})
        clock.now += step
    await on_event({"type": "agent_end", "turn_id": "t1", "status": "completed", "last_seq": 0})
    await live.socket_leave(socket)
    return sent


def deltas(sent: list[dict]) -> list[str]:
    return [event["text"] for event in sent if event["type"] == "delta"]


async def test_a_late_loop_gets_fewer_deltas_with_the_same_text_and_no_gap(backend, monkeypatch):
    # 50 pieces 40 ms apart (a 2 s answer): every other one leaves on a loop that keeps up,
    # one in eight while it runs 300 ms late.
    keeping_up = await stream(monkeypatch, lag=0.0, pieces=50, step=0.04)
    live._sockets.clear()
    await database_sync_to_async(get_store().delete)("s1")
    behind = await stream(monkeypatch, lag=0.3, pieces=50, step=0.04)

    whole = "".join(f"{index}," for index in range(50))
    assert "".join(deltas(keeping_up)) == "".join(deltas(behind)) == whole
    assert len(deltas(behind)) <= len(deltas(keeping_up)) / 3
    for sent in (keeping_up, behind):
        assert [event["event_seq"] for event in sent] == list(range(1, len(sent) + 1))
        assert sent[-1]["type"] == "agent_end"


async def test_the_interval_never_grows_past_its_bound(backend, monkeypatch):
    # A loop ten seconds late still sends a piece every DELTA_INTERVAL_MAX_SEC of the turn.
    step = broadcasts.DELTA_INTERVAL_MAX_SEC
    sent = await stream(monkeypatch, lag=10.0, pieces=6, step=step)
    assert deltas(sent) == [f"{index}," for index in range(6)]


async def test_text_kept_for_the_interval_leaves_when_the_model_pauses(backend, monkeypatch):
    # The model sends two pieces at once and then says nothing for a while (thinking, or a
    # slow tool call's arguments): the second piece must not wait for a third.
    import asyncio

    from sessions_app.runtime.loop.event_pump import EventPump
    from tests.helpers import GUARD_SEC

    monkeypatch.setattr(loop_lag, "current", lambda: 0.0)
    await database_sync_to_async(get_store().create)("s1")
    texts: list[str] = []
    both_shown = asyncio.Event()

    async def record(text):
        event = json.loads(text)
        if event["type"] == "delta":
            texts.append(event["text"])
            if "".join(texts) == "Hello, world":
                both_shown.set()

    socket = live.LiveSocket("s1", record)
    await live.socket_join(socket)
    await socket.go_live(None)
    pump = EventPump(broadcasts.turn_event_broadcaster("s1"))
    pump.put({"type": "agent_start", "turn_id": "t1"})
    pump.put({"type": "delta", "turn_id": "t1", "text": "Hello, "})
    async with asyncio.timeout(GUARD_SEC):
        while texts != ["Hello, "]:
            await asyncio.sleep(0)  # the pump sends the first piece at once
    pump.put({"type": "delta", "turn_id": "t1", "text": "world"})  # within the interval: kept
    async with asyncio.timeout(GUARD_SEC):
        await both_shown.wait()  # no third piece, no other event: the timer sent it
    assert texts == ["Hello, ", "world"]
    pump.put({"type": "agent_end", "turn_id": "t1", "status": "completed", "last_seq": 0})
    await pump.close()
    await live.socket_leave(socket)
