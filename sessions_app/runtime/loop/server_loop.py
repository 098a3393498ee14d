"""The event loop a server process serves its sockets on, and channel-layer sends handed to it.

Synchronous code of a server (a turn's closing in a store thread, an HTTP view) tells the
sockets about what it committed through the channel layer, whose calls are coroutines.
`async_to_sync` from such a thread starts a thread and an event loop of its own for every
send, and with Redis a connection too: per turn, 6% of a worker's CPU in a storm of turns
(docs/performance.md). So when this process serves sockets, the send goes to that loop
instead: in the order the sends were made (one task sends them one after another, since a
Redis send awaits between its steps), without the caller waiting for it.

Without a serving loop (a command, a test without a server) `send_soon` runs the send
through `async_to_sync`, as before, and returns when it is done.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Awaitable, Callable

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer

logger = logging.getLogger(__name__)

_serving: list[_Sender] = []  # the loop of this process's sockets, once one has connected


class _Sender:
    def __init__(self, loop: asyncio.AbstractEventLoop):
        self.loop = loop
        self.waiting: deque[Callable[[], Awaitable[object]]] = deque()
        self.draining = False  # read and written on the loop only

    def put(self, send: Callable[[], Awaitable[object]]) -> None:
        """From any thread, the loop's included."""
        self.loop.call_soon_threadsafe(self._arrive, send)

    def _arrive(self, send: Callable[[], Awaitable[object]]) -> None:
        self.waiting.append(send)
        if not self.draining:
            self.draining = True
            self.loop.create_task(self._drain())

    async def _drain(self) -> None:
        try:
            while self.waiting:
                send = self.waiting.popleft()
                try:
                    await send()
                except Exception:
                    # The caller has moved on: a send that fails is the operator's to see.
                    logger.exception("a channel-layer send from synchronous code failed")
        finally:
            self.draining = False


def serve_on_this_loop() -> None:
    """Note the running event loop as this server process's (a socket's consumer calls it)."""
    loop = asyncio.get_running_loop()
    if not _serving or _serving[0].loop is not loop:
        _serving[:] = [_Sender(loop)]


def _running_sender() -> _Sender | None:
    sender = _serving[0] if _serving else None
    return sender if sender is not None and sender.loop.is_running() else None


def serving_loop() -> asyncio.AbstractEventLoop | None:
    """This process's serving loop while it runs, else None."""
    sender = _running_sender()
    return sender.loop if sender is not None else None


def send_soon(send: Callable[[], Awaitable[object]]) -> None:
    """Run the coroutine `send()` makes: on the serving loop when there is one (in order with
    the other sends made so, not waited for), else here and now through `async_to_sync`."""
    sender = _running_sender()
    if sender is not None:
        sender.put(send)
    else:
        async_to_sync(_awaited)(send)


def group_send_soon(group: str, message: dict) -> bool:
    """`send_soon` of one channel-layer group send; False when the process has no layer."""
    layer = get_channel_layer()
    if layer is None:
        return False
    send_soon(lambda: layer.group_send(group, message))
    return True


async def _awaited(send: Callable[[], Awaitable[object]]) -> None:
    await send()
