"""Stops from other workers, heard on a thread of this worker's own (docs/design.md §26).

A Stop pressed on another worker is published twice: to the running turn's control channel,
which the worker's event loop reads (runtime.live_bus), and to its stop channel, which this
thread reads. Under a storm of streamed answers the event loop is a pass or two behind its
sockets, a tenth of a second each: the Stop sat in the control connection's buffer until the
loop came round to its reader, and the reader's wake-up was a pass of its own. The thread
wakes as soon as the bytes arrive (it waits for the GIL, 5 ms at most) and sets the turn's
abort flag, whose waiter then resumes at the front of the loop's next pass (runtime.tools).

The control channel stays the way that never fails: a Stop that arrives before this thread
subscribed, or while its connection reconnects, is heard there. Whichever hears a Stop first
acts on it (`first_to_hear`); the other lets it go.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections import deque
from collections.abc import Callable

import redis.asyncio as aioredis
from django.conf import settings

logger = logging.getLogger(__name__)

RECONNECT_PAUSE_SEC = 0.5
# Stops remembered, so that the second way one arrives by is let go. Both copies arrive within
# a pass of the event loop of each other; thousands of Stops in between never happen.
REMEMBERED_STOPS = 4096


class HeardStops:
    """The ids of the Stops acted on lately, from any thread."""

    def __init__(self, size: int = REMEMBERED_STOPS):
        self._lock = threading.Lock()
        self._order: deque[str] = deque()
        self._ids: set[str] = set()
        self._size = size

    def first_to_hear(self, stop_id: str | None) -> bool:
        """True once per id (always for a Stop without one, from an older worker)."""
        if stop_id is None:
            return True
        with self._lock:
            if stop_id in self._ids:
                return False
            self._ids.add(stop_id)
            self._order.append(stop_id)
            if len(self._order) > self._size:
                self._ids.discard(self._order.popleft())
        return True


class StopLine:
    """One thread with an event loop and a Redis connection of its own, subscribed to the stop
    channels of the turns this worker runs. `listen` and `forget` are called from the
    worker's loop and never wait; `on_stop(channel, data)` runs on the thread."""

    def __init__(self, url: str, on_stop: Callable[[str, bytes], None]):
        self._url = url
        self._on_stop = on_stop
        self._requests: list[tuple[str, str]] = []  # (SUBSCRIBE or UNSUBSCRIBE, channel)
        self._lock = threading.Lock()
        self._started = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wake: asyncio.Event | None = None
        self._closing: asyncio.Event | None = None
        self._thread = threading.Thread(target=self._run, name="live-bus-stops", daemon=True)
        self._thread.start()
        self._started.wait()

    def listen(self, channel: str) -> None:
        self._ask("SUBSCRIBE", channel)

    def forget(self, channel: str) -> None:
        self._ask("UNSUBSCRIBE", channel)

    def close(self) -> None:
        """End the thread and its connection (the worker's bus is gone)."""
        with contextlib.suppress(RuntimeError):  # the thread's loop has ended already
            self._loop.call_soon_threadsafe(self._closing.set)

    def _ask(self, verb: str, channel: str) -> None:
        with self._lock:
            self._requests.append((verb, channel))
        with contextlib.suppress(RuntimeError):
            self._loop.call_soon_threadsafe(self._wake.set)

    # --- on the thread ----------------------------------------------------------------------
    def _run(self) -> None:
        asyncio.run(self._main())

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._wake, self._closing = asyncio.Event(), asyncio.Event()
        self._started.set()
        pubsub = aioredis.Redis.from_url(
            self._url,
            socket_timeout=None,  # the reads wait for as long as nothing is published
            socket_connect_timeout=settings.REDIS_CONNECT_TIMEOUT_SEC,
            **settings.REDIS_CONNECTION_OPTIONS,
        ).pubsub()
        commands = asyncio.ensure_future(self._command_loop(pubsub))
        try:
            await self._closing.wait()
        finally:
            commands.cancel()
            await asyncio.gather(commands, return_exceptions=True)
            await pubsub.aclose()

    async def _command_loop(self, pubsub) -> None:
        """Send the (un)subscriptions asked for, in order and batched; the reader starts with
        the first subscription (a pub/sub connection with none has nothing to read)."""
        reader: asyncio.Task | None = None
        try:
            while True:
                await self._wake.wait()
                self._wake.clear()
                with self._lock:
                    batch, self._requests = self._requests, []
                for verb, channels in verb_runs(batch):
                    try:
                        if verb == "SUBSCRIBE":
                            await pubsub.subscribe(*channels)
                        else:
                            await pubsub.unsubscribe(*channels)
                    except (aioredis.RedisError, OSError):
                        # The control channel still carries these turns' Stops.
                        logger.exception("stop line %s of %d channels failed", verb, len(channels))
                if reader is None and pubsub.connection is not None:
                    reader = asyncio.ensure_future(self._read_loop(pubsub))
        finally:
            if reader is not None:
                reader.cancel()
                await asyncio.gather(reader, return_exceptions=True)

    async def _read_loop(self, pubsub) -> None:
        while True:
            try:
                message = await pubsub.get_message(timeout=None)
            except (aioredis.RedisError, OSError):
                # redis-py reconnects on the next read and subscribes again; meanwhile the
                # control channel carries the Stops.
                logger.exception("stop line connection lost; reconnecting")
                await asyncio.sleep(RECONNECT_PAUSE_SEC)
                continue
            if message is None or message["type"] != "message":
                continue
            try:
                self._on_stop(message["channel"].decode(), message["data"])
            except Exception:  # noqa: BLE001 - one bad message must not end the thread
                logger.exception("stop line message failed")


def verb_runs(batch: list[tuple[str, str]]) -> list[tuple[str, list[str]]]:
    """Consecutive (verb, channel) pairs of the same verb joined: one command each."""
    runs: list[tuple[str, list[str]]] = []
    for verb, channel in batch:
        if runs and runs[-1][0] == verb:
            runs[-1][1].append(channel)
        else:
            runs.append((verb, [channel]))
    return runs
