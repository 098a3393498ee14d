"""A session's events sent to its open tabs through the channel layer.

Every write is a service (docs/design.md §16: one module per action family)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from django.db import transaction

from jarvis_site.shared import metrics
from sessions_app import selectors
from sessions_app.core.ids import (
    group_name,
)
from sessions_app.runtime.live import live
from sessions_app.runtime.loop import loop_lag, server_loop
from sessions_app.runtime.loop.running import running_loop
from sessions_app.store import (
    EntryRecord,
)


def session_broadcast(*, session_id: str, event: dict[str, Any]) -> None:
    """Send one WebSocket event (docs/design.md §8) to every connection of a session, in any process.

    Callable from synchronous code only (services, the turn thread); async callers await
    the channel layer themselves. In a server the send leaves from its event loop, after the
    caller has moved on (runtime.loop.server_loop).
    """
    message = {"type": "session.event", "event": event}
    if server_loop.group_send_soon(group_name(session_id), message):
        metrics.EVENTS_SENT.inc()


def session_broadcast_on_commit(*, session_id: str, event: dict[str, Any]) -> None:
    # Clients must never hear about a change that was rolled back.
    transaction.on_commit(lambda: session_broadcast(session_id=session_id, event=event))


# Streamed text reaches the sockets at most once per DELTA_INTERVAL_SEC per turn: one event
# per token would flood the other workers (and every tab) long before anyone can read that fast.
DELTA_INTERVAL_SEC = 0.05
# While the worker's event loop runs late, the interval grows with its lag, up to this bound:
# a piece sent sooner would wait in the loop anyway, and every piece sent is work for the loop
# (encoding, a socket write per tab, a publish) that delays every other turn and Stop.
DELTA_INTERVAL_MAX_SEC = 0.5


def delta_interval() -> float:
    """The coalescing interval now: DELTA_INTERVAL_SEC, or the loop's lag when it is behind,
    never more than DELTA_INTERVAL_MAX_SEC."""
    return min(DELTA_INTERVAL_MAX_SEC, max(DELTA_INTERVAL_SEC, loop_lag.current()))


def turn_event_broadcaster(session_id: str, *, clock=time.monotonic):
    """An `on_event` coroutine for turn_run that hands the turn's events to every socket of
    the session (sessions_app.runtime.live.live: numbered, folded into the running state, delivered to
    this worker's sockets directly and published once for the other workers).

    - Entries arrive as EntryRecord objects and leave as the API shows them.
    - `delta`s are coalesced: a piece that arrives within `delta_interval()` (50 ms, more
      while the event loop is behind) of the last `delta` sent waits, and leaves joined
      with the next piece that arrives after the interval, or just before the turn's next
      other event, so the order tabs see is the order of the turn — or, when the model
      pauses first, once the interval has passed: a timer hands an empty piece to the turn's
      event pump (`attach`), which sends what waits in its place in the order.

    The turn's event pump awaits it on the event loop, beside the turn, one event at a time.
    """
    pending: list[str] = []
    state: dict[str, Any] = {
        "turn": None,
        "sent_at": None,
        "starting": False,
        "begun": False,
        "put": None,  # the event pump's `put`, once attached
        "timer": None,  # sends what waits if no piece comes after it (see `keep_until_due`)
    }

    def keep_until_due() -> None:
        # A kept piece must not wait for the model's next one: a model that pauses (thinking,
        # a slow tool call's arguments) would leave its last words off every tab.
        if state["timer"] is not None or state["put"] is None or not pending:
            return
        waited = clock() - state["sent_at"] if state["sent_at"] is not None else 0.0
        delay = min(DELTA_INTERVAL_MAX_SEC, max(0.0, delta_interval() - waited))
        state["timer"] = running_loop().call_later(delay, due)

    def due() -> None:
        state["timer"] = None
        if pending and state["put"] is not None:
            # Empty: it only makes the pump ask `on_event` (or `absorb`) again, in order.
            state["put"]({"type": "delta", "text": ""})

    async def send(event: dict[str, Any]) -> None:
        if event["type"] == "agent_start":
            state["begun"] = True
            state["turn"] = await live.turn_begin(session_id=session_id, turn_id=event["turn_id"])
        if state["turn"] is None:
            return  # a listener joined after the start: nothing to number its events from
        await live.turn_event(state["turn"], event)
        if event["type"] == "agent_end":
            await live.turn_finish(state["turn"])
            state["turn"] = None

    async def flush() -> None:
        if pending:
            text = "".join(pending)
            pending.clear()
            state["sent_at"] = clock()
            await send({"type": "delta", "text": text})

    async def on_event(event: dict[str, Any]) -> None:
        kind = event.get("type")
        if kind == "delta":
            if event.get("text"):
                pending.append(event["text"])
            sent_at = state["sent_at"]
            if sent_at is None or clock() - sent_at >= delta_interval():
                await flush()
            else:
                keep_until_due()
            return
        await flush()
        if kind == "entry" and isinstance(event.get("entry"), EntryRecord):
            event = {**event, "entry": selectors.entry_to_api(event["entry"])}
        await send(event)

    def absorb(event: dict[str, Any]) -> bool:
        """Keep a delta that arrives within the interval, as `on_event` would, without being
        awaited; False when it is due to leave (the caller then hands it to `on_event`)."""
        sent_at = state["sent_at"]
        if sent_at is None:
            return False
        elapsed = clock() - sent_at
        # The interval is never below DELTA_INTERVAL_SEC: most pieces are kept without
        # asking the loop's lag (a lookup per piece, 2% of a storm's CPU).
        if elapsed >= DELTA_INTERVAL_SEC and elapsed >= delta_interval():
            return False
        if event.get("text"):
            pending.append(event["text"])
        keep_until_due()
        return True

    def prepare() -> None:
        # The turn is about to take its lease: its joinable state gets ready meanwhile.
        state["starting"] = True
        live.turn_starting(session_id=session_id)

    def attach(put: Callable[[dict[str, Any]], None]) -> None:
        state["put"] = put

    async def close() -> None:
        if state["timer"] is not None:
            state["timer"].cancel()
            state["timer"] = None
        # A turn cut short without agent_end (its session deleted under it) must not stay
        # joinable: a socket of a session re-created with the id would see it running.
        if state["turn"] is not None:
            await live.turn_finish(state["turn"])
            state["turn"] = None
        elif state["starting"] and not state["begun"]:
            await live.turn_not_started(session_id=session_id)

    on_event.close = close
    on_event.prepare = prepare
    on_event.absorb = absorb
    on_event.attach = attach
    return on_event
