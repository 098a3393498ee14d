"""A turn's events, delivered to their listener in order, beside the turn."""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections import deque
from collections.abc import Callable

logger = logging.getLogger(__name__)

_CLOSE = None  # queued after the last event: the pump ends once it has sent what came before


class EventPump:
    """Delivers a turn's events to `on_event` in order, beside the turn.

    The turn and its model stream only queue events (cheap, never blocking); a task sends
    them, so a slow channel layer never slows the model's stream. Deltas queued while the
    previous send was under way go out as one, which keeps a fast stream from flooding the
    layer. `on_event` may be a coroutine function (the sockets' broadcaster) or a plain
    callable that returns at once; if it has a coroutine function `close`, that is awaited
    once the turn has sent its last event, however the turn ended (even when the session
    was deleted under it and no `agent_end` was sent).
    """

    def __init__(self, on_event: Callable[[dict], object] | None):
        self.on_event = on_event
        # A listener may take a delta that need not leave yet without a trip through the
        # queue (`absorb`, the broadcaster's): most of a stream's pieces only wait for the
        # next send, and waking the pump for each was a tenth of a streaming turn's CPU.
        self.absorb = getattr(on_event, "absorb", None)
        self.events: deque[dict | None] = deque()
        self.wakeup: asyncio.Future | None = None
        self.sending = False  # the task is inside a send (not waiting for work)
        self.task = asyncio.ensure_future(self._run()) if on_event is not None else None
        # A listener may get ready for the turn while it takes its lease (`prepare`, the
        # broadcaster's: its live-bus subscription, docs/design.md §26).
        prepare = getattr(on_event, "prepare", None)
        if prepare is not None:
            prepare()
        # A listener that keeps pieces may need to hand the pump an event of its own later
        # (`attach`, the broadcaster's: what it kept, once due, when no piece follows).
        attach = getattr(on_event, "attach", None)
        if attach is not None and self.task is not None:
            attach(self.put)

    def put(self, event: dict) -> None:
        if self.task is None:
            return
        # Only when nothing waits in the queue: the piece must not overtake an event.
        if (
            self.absorb is not None
            and event["type"] == "delta"
            and not self.events
            and self.absorb(event)
        ):
            return
        self._queue(event)

    async def close(self) -> None:
        """Send what is queued, then the listener's `close`.

        When the task is waiting for work, the last events leave from the caller's own
        task: waking the pump would cost one more pass of a busy event loop before the
        turn's `agent_end` reaches the tabs, and a Stop is judged by that (§26)."""
        if self.task is None:
            return
        if self.sending:
            self._queue(_CLOSE)
            await self.task
        else:
            # It waits for work, so nothing of an event is under way; it ends at its next
            # step, and nothing waits for that.
            self.task.cancel()
            try:
                while self.events:
                    await self._send_next()
            except asyncio.CancelledError:
                # The caller was cancelled mid-way: what is left still leaves, and the
                # listener is closed, from a task of its own.
                self._queue(_CLOSE)
                self.task = asyncio.ensure_future(self._run_then_close())
                raise
        await self._close_listener()

    async def _run_then_close(self) -> None:
        await self._run()
        await self._close_listener()

    async def _close_listener(self) -> None:
        closing = getattr(self.on_event, "close", None)
        if closing is not None:
            await closing()

    def _queue(self, event: dict | None) -> None:
        self.events.append(event)
        if self.wakeup is not None and not self.wakeup.done():
            self.wakeup.set_result(None)

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            while not self.events:
                self.wakeup = loop.create_future()
                await self.wakeup
            self.sending = True
            try:
                if await self._send_next():
                    return
            finally:
                self.sending = False

    async def _send_next(self) -> bool:
        """Send the next event (with the deltas right behind it, as one); True at the end."""
        event = self.events.popleft()
        if event is _CLOSE:
            return True
        while event["type"] == "delta" and self.events:
            following = self.events[0]  # merge only a delta that follows
            if following is _CLOSE or following["type"] != "delta":
                break
            self.events.popleft()
            event = {**event, "text": event["text"] + following["text"]}
        try:
            outcome = self.on_event(event)
            if inspect.isawaitable(outcome):
                await outcome
        except Exception:  # noqa: BLE001 - a listener that went away must not break the turn
            logger.exception("turn event listener failed on %s", event.get("type"))
        return False
