"""The first model call of a turn started at once, on an event loop of its own (§26).

A model request waits on its connection several times before its first piece: the socket's
connect, the transport's making, the answer's headers. Each wait ends in a pass of the
worker's event loop, and under a storm of streamed answers a pass is hundreds of callbacks,
0.2–1 s of work: a person's short question asked during a two-worker storm spent 0.5–1 s
there, with its request already built (docs/performance.md).

The first model call of a turn started at once (runtime.loop.eager's Spacing allows one per
START_AT_ONCE_EVERY_SEC) runs instead on a loop in a thread of its own, which has nothing
else to do: its waits end at once. Its pieces come back to the worker's loop in a callback
put at the front of that loop's queue (runtime.loop.loop_lane), where the turn feeds them to its
answer as it would have. The call is the same call, through the same SDK client class (one
per loop); its errors are raised in the turn, and cancelling the turn cancels it.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import os
import threading
import weakref
from collections import deque
from collections.abc import AsyncIterator, Callable
from typing import Any

from sessions_app.runtime.loop.loop_lane import FirstFuture, call_first_threadsafe


class _OneCall:
    """Shared by the copies of a turn's context: the first model call takes it."""

    __slots__ = ("taken",)

    def __init__(self):
        self.taken = False

    def take(self) -> bool:
        if self.taken:
            return False
        self.taken = True
        return True


_FIRST_CALL: contextvars.ContextVar[_OneCall | None] = contextvars.ContextVar(
    "jarvis_first_call_beside", default=None
)


def first_call_beside(context: contextvars.Context) -> None:
    """The next model call made in `context` (a turn started at once) runs beside."""
    context.run(_FIRST_CALL.set, _OneCall())


def takes_the_side_loop() -> bool:
    """True once per turn marked by `first_call_beside`: for its first model call."""
    one = _FIRST_CALL.get()
    return one is not None and one.take()


class _SideLoop:
    """A loop in a daemon thread, made at first use (again in a forked child)."""

    def __init__(self):
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._pid: int | None = None

    def get(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None or self._pid != os.getpid():
                self._loop = asyncio.new_event_loop()
                self._pid = os.getpid()
                threading.Thread(
                    target=self._loop.run_forever, name="jarvis-beside", daemon=True
                ).start()
            return self._loop


_side = _SideLoop()


def close_beside_when_gone(owner: object, client) -> None:
    """Close `client`, made on the side loop for `owner`, once `owner` is collected: the
    side loop never ends, so nothing else would (a server's providers live as long as it;
    a test's do not)."""
    loop = _side.get()

    def close() -> None:
        with contextlib.suppress(RuntimeError):  # the loop has closed
            asyncio.run_coroutine_threadsafe(client.close(), loop)

    weakref.finalize(owner, close)


def is_the_side_loop(loop: asyncio.AbstractEventLoop) -> bool:
    return loop is _side._loop


class _Ended:
    """The last thing handed over: how the reading ended."""

    __slots__ = ("error",)

    def __init__(self, error: BaseException | None):
        self.error = error


async def stream_beside(
    pieces: Callable[[], AsyncIterator[Any]], feed: Callable[[Any], None]
) -> None:
    """Iterate `pieces()` (an async generator, made and read on the side loop) and call
    `feed` with each piece on the caller's loop, in order. Its error is raised here, after
    the pieces before it; an error of `feed`, or cancelling the caller, cancels the reading."""
    here = asyncio.get_running_loop()
    arrived: deque = deque()
    lock = threading.Lock()
    waiter: list[FirstFuture | None] = [None]

    def hand(piece) -> None:  # on the side loop
        with lock:
            arrived.append(piece)
            woken, waiter[0] = waiter[0], None
        if woken is not None:
            call_first_threadsafe(here, woken.settle)

    async def read() -> None:
        try:
            async for piece in pieces():
                hand(piece)
        except BaseException as error:
            hand(_Ended(error))
            raise
        hand(_Ended(None))

    reading = asyncio.run_coroutine_threadsafe(read(), _side.get())
    try:
        while True:
            with lock:
                batch = list(arrived)
                arrived.clear()
                if not batch:
                    waiter[0] = FirstFuture(loop=here)
                    woken = waiter[0]
            if not batch:
                await woken
                continue
            for piece in batch:
                if isinstance(piece, _Ended):
                    if piece.error is not None:
                        raise piece.error
                    return
                feed(piece)
    finally:
        reading.cancel()  # nothing once it ended; else the side loop closes the request
