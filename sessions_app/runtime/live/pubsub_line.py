"""A Redis pub/sub connection of the live bus, read on a thread of its own (docs/design.md §26).

Each worker keeps two: its control channels (`ask` and `abort` for the turns it runs, the
answers to its own asks) and the events of the turns it follows. Both used to be read by
tasks of the worker's event loop. Under a storm of streamed answers that loop is a pass or
two behind its sockets, a tenth of a second to a second each: a Stop from another worker sat
in the connection's buffer until the loop came round to the reader, and the reader's wake-up
was a pass of its own; so did the confirmation of a turn's control subscription, which its
first publishes wait for, and the `agent_end` that tells the tab which pressed Stop on the
other worker that its turn ended.

The thread wakes as soon as the bytes arrive (it waits for the GIL, 5 ms at most) and hands
what redis-py read to `on_message`, on the thread: the bus sets a stopped turn's abort flag
there (runtime.turn.turns, from any thread) and hands everything else to its loop, ahead of the
loop's waiting work (`loop_lane.call_first_threadsafe`), in the order it was read.

Redis going away (docs/design.md §32): the line says so (`on_lost`), tries again every
RECONNECT_PAUSE_SEC, and once Redis answers subscribes again to every channel still wanted —
those asked for while it was away too, which redis-py, whose SUBSCRIBE failed, never
recorded — and says so (`on_back`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Callable

import redis.asyncio as aioredis
from django.conf import settings

logger = logging.getLogger(__name__)

RECONNECT_PAUSE_SEC = 0.5

OnMessage = Callable[[dict], None]
OnFailed = Callable[[list[str], Exception], None]
OnLost = Callable[[], None]
OnBack = Callable[[], None]


class PubSubLine:
    """One thread with an event loop and a Redis pub/sub connection of its own. `listen` and
    `forget` are called from the worker's loop and never wait; on the thread,
    `on_message(message)` gets every message and (un)subscription confirmation as redis-py
    reads it, `on_failed(channels, error)` a SUBSCRIBE that failed, `on_lost()` a lost
    connection (an UNSUBSCRIBE in flight is never confirmed), and `on_back()` the connection
    open again with every wanted channel subscribed."""

    def __init__(
        self,
        name: str,
        url: str,
        on_message: OnMessage,
        on_failed: OnFailed,
        on_lost: OnLost,
        on_back: OnBack,
    ):
        self._url = url
        self._on_message = on_message
        self._on_failed = on_failed
        self._on_lost = on_lost
        self._on_back = on_back
        self._requests: list[tuple[str, str]] = []  # (SUBSCRIBE or UNSUBSCRIBE, channel)
        self._wanted: set[str] = set()  # on the thread: what was last asked for each channel
        self._broken: asyncio.Event | None = None  # the connection is lost or never opened
        self._lock = threading.Lock()
        self._started = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wake: asyncio.Event | None = None
        self._closing: asyncio.Event | None = None
        self.pubsub = None  # the thread's, once it runs
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
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
        self._wake, self._closing, self._broken = asyncio.Event(), asyncio.Event(), asyncio.Event()
        try:
            self.pubsub = aioredis.Redis.from_url(
                self._url,
                socket_timeout=None,  # the reads wait for as long as nothing is published
                socket_connect_timeout=settings.REDIS_CONNECT_TIMEOUT_SEC,
                **settings.REDIS_CONNECTION_OPTIONS,
            ).pubsub()
        finally:
            self._started.set()  # the worker's loop waits for this, whatever happened
        commands = asyncio.ensure_future(self._command_loop())
        try:
            await self._closing.wait()
        finally:
            commands.cancel()
            await asyncio.gather(commands, return_exceptions=True)
            await self.pubsub.aclose()

    async def _command_loop(self) -> None:
        """Send the (un)subscriptions asked for, as few commands as their order allows
        (`SUBSCRIBE a b c`, then `UNSUBSCRIBE d`, ...): the turns of a burst subscribe
        together. The reader starts with the first subscription (a pub/sub connection with
        none has nothing to read)."""
        reader: asyncio.Task | None = None
        try:
            while True:
                await self._wake.wait()
                self._wake.clear()
                with self._lock:
                    batch, self._requests = self._requests, []
                for verb, channels in verb_runs(batch):
                    if verb == "SUBSCRIBE":
                        self._wanted.update(channels)
                    else:
                        self._wanted.difference_update(channels)
                    if self._broken.is_set():
                        # Redis is away: the reconnection subscribes to what is wanted then.
                        if verb == "SUBSCRIBE":
                            self._on_failed(channels, ConnectionError("Redis is away"))
                        continue
                    try:
                        if verb == "SUBSCRIBE":
                            await self.pubsub.subscribe(*channels)
                        else:
                            await self.pubsub.unsubscribe(*channels)
                    except Exception as error:  # noqa: BLE001 - handed to whoever waits
                        logger.warning(
                            "live bus %s of %d channels failed: %s", verb, len(channels), error
                        )
                        if verb == "SUBSCRIBE":
                            self._on_failed(channels, error)
                        if reader is not None and not self._broken.is_set():
                            self._broken.set()
                            self._on_lost()
                        elif reader is None:
                            self._broken.set()  # never connected: the reader reconnects
                if reader is None and (self.pubsub.connection is not None or self._broken.is_set()):
                    reader = asyncio.ensure_future(self._read_loop())
        finally:
            if reader is not None:
                reader.cancel()
                await asyncio.gather(reader, return_exceptions=True)

    async def _read_loop(self) -> None:
        while True:
            if self._broken.is_set():
                await self._reconnect()
            try:
                message = await self.pubsub.get_message(timeout=None)
            except (aioredis.RedisError, OSError) as error:
                logger.warning("live bus connection lost (%s); reconnecting", error)
                if not self._broken.is_set():
                    self._broken.set()
                    self._on_lost()
                continue
            if message is None:
                continue
            try:
                self._on_message(message)
            except Exception:  # noqa: BLE001 - one bad message must not end the thread
                logger.exception("live bus message failed")

    async def _reconnect(self) -> None:
        """Until Redis answers: then every wanted channel is subscribed (again), those no
        longer wanted are left, and `on_back` is told."""
        while True:
            await asyncio.sleep(RECONNECT_PAUSE_SEC)
            try:
                # Opens the connection; redis-py subscribes again to what it had recorded.
                await self.pubsub.ping()
                if self._wanted:
                    await self.pubsub.subscribe(*self._wanted)
                stale = {_text(name) for name in self.pubsub.channels} - self._wanted
                if stale:
                    await self.pubsub.unsubscribe(*stale)
            except (aioredis.RedisError, OSError):
                continue
            self._broken.clear()
            logger.warning("live bus connection back")
            self._on_back()
            return


def _text(name: str | bytes) -> str:
    return name.decode() if isinstance(name, bytes) else name


def verb_runs(batch: list[tuple[str, str]]) -> list[tuple[str, list[str]]]:
    """Consecutive (verb, channel) pairs of the same verb joined: one command each."""
    runs: list[tuple[str, list[str]]] = []
    for verb, channel in batch:
        if runs and runs[-1][0] == verb:
            runs[-1][1].append(channel)
        else:
            runs.append((verb, [channel]))
    return runs
