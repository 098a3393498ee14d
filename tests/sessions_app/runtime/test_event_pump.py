"""A turn's event pump: every event delivered once, in order, however the turn closes it."""

import asyncio

from sessions_app.runtime.loop.event_pump import EventPump


class Listener:
    """Records what it is sent and by which task; a send can be held until released."""

    def __init__(self):
        self.sent: list[tuple[str, str]] = []
        self.senders: list[asyncio.Task] = []
        self.hold: asyncio.Event | None = None
        self.holding = asyncio.Event()
        self.closed = 0

    async def __call__(self, event):
        self.senders.append(asyncio.current_task())
        if self.hold is not None and event["type"] == "entry":
            self.holding.set()
            await self.hold.wait()
        if event["type"] == "boom":
            raise RuntimeError("the listener went away")
        self.sent.append((event["type"], event.get("text", "")))

    async def close(self):
        self.closed += 1


def held_listener() -> Listener:
    """A listener whose `entry` sends wait until the test sets its `hold`."""
    listener = Listener()
    listener.hold = asyncio.Event()
    return listener


async def idle_pump(listener: Listener) -> EventPump:
    """A pump whose task has started and waits for work."""
    pump = EventPump(listener)
    await asyncio.sleep(0)  # a yield to the loop: the pump's task runs up to its wait
    return pump


def test_events_leave_in_order_and_deltas_behind_a_send_leave_as_one():
    async def scenario():
        listener = held_listener()
        pump = EventPump(listener)
        pump.put({"type": "entry"})
        await listener.holding.wait()  # the pump is inside the entry's send
        for piece in ("a", "b", "c"):
            pump.put({"type": "delta", "text": piece})
        pump.put({"type": "boom"})
        pump.put({"type": "delta", "text": "d"})
        listener.hold.set()
        await pump.close()
        return listener

    listener = asyncio.run(scenario())
    # A listener that fails on one event still gets the next.
    assert listener.sent == [("entry", ""), ("delta", "abc"), ("delta", "d")]
    assert listener.closed == 1


def test_a_closing_turn_sends_its_last_events_itself_when_the_pump_is_idle():
    async def scenario():
        listener = Listener()
        pump = await idle_pump(listener)
        pump.put({"type": "entry"})
        pump.put({"type": "agent_end"})
        await pump.close()
        return listener, asyncio.current_task()

    listener, closer = asyncio.run(scenario())
    assert listener.sent == [("entry", ""), ("agent_end", "")]
    # No pass of the event loop between the turn's end and its agent_end (§26).
    assert listener.senders == [closer, closer]
    assert listener.closed == 1


def test_closing_while_a_send_is_under_way_waits_for_it_and_keeps_the_order():
    async def scenario():
        listener = held_listener()
        pump = EventPump(listener)
        pump.put({"type": "entry"})
        await listener.holding.wait()
        pump.put({"type": "delta", "text": "x"})
        pump.put({"type": "agent_end"})
        closing = asyncio.ensure_future(pump.close())
        await asyncio.sleep(0)
        assert not closing.done(), "close waits for the send under way"
        listener.hold.set()
        await closing
        return listener

    listener = asyncio.run(scenario())
    assert listener.sent == [("entry", ""), ("delta", "x"), ("agent_end", "")]
    assert listener.closed == 1


def test_a_pump_without_a_listener_takes_events_and_closes():
    async def scenario():
        pump = EventPump(None)
        pump.put({"type": "delta", "text": "x"})
        await pump.close()

    asyncio.run(scenario())


def test_a_turn_cancelled_while_it_sends_its_last_events_still_gets_them_out():
    async def scenario():
        listener = held_listener()
        pump = await idle_pump(listener)

        async def turn_ends():
            pump.put({"type": "entry"})
            pump.put({"type": "agent_end"})
            await pump.close()

        closing = asyncio.ensure_future(turn_ends())
        await listener.holding.wait()  # the turn's own task is inside the entry's send
        assert listener.senders == [closing]
        closing.cancel()
        await asyncio.gather(closing, return_exceptions=True)
        listener.hold.set()
        await pump.task  # the rest leaves, and the listener closes, from a task of its own
        return listener

    listener = asyncio.run(scenario())
    # The entry's send was the one cancelled; agent_end still reached the listener.
    assert listener.sent == [("agent_end", "")]
    assert listener.closed == 1
