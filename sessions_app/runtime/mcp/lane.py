"""The MCP lane: one thread of this process with an event loop of its own, on which every MCP
connection lives (docs/design.md §31).

A connection of the SDK is a task group that must be entered and left by one task of one
loop, and a kept connection outlives the turn that opened it. Turns run on many loops — a
server's socket loop, a loop per synchronous caller (the HTTP API, a command, a test) — so
the connections live here instead, and a turn awaits its call from its own loop
(`on_lane`): the SDK's reading, writing and process handling never take a pass of a turn's
loop, and a turn cancelled there cancels its call here (the SDK then tells the server,
`notifications/cancelled`).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")

_lock = threading.Lock()
_loop: asyncio.AbstractEventLoop | None = None


def lane_loop() -> asyncio.AbstractEventLoop:
    """The lane's loop, started on first use (a daemon thread: it dies with the process)."""
    global _loop
    with _lock:
        if _loop is None or _loop.is_closed():
            loop = asyncio.new_event_loop()
            started = threading.Event()

            def serve() -> None:
                asyncio.set_event_loop(loop)
                loop.call_soon(started.set)
                loop.run_forever()

            threading.Thread(target=serve, name="mcp-lane", daemon=True).start()
            started.wait()
            _loop = loop
        return _loop


async def on_lane(work: Coroutine[Any, Any, T]) -> T:
    """Await `work` run on the lane, from any other loop. Cancelling the awaiting task
    cancels `work` at once; its unwinding (a courtesy cancel to the server) goes on there."""
    future: concurrent.futures.Future = asyncio.run_coroutine_threadsafe(work, lane_loop())
    try:
        return await asyncio.wrap_future(future)
    except asyncio.CancelledError:
        future.cancel()
        raise


def lane_run(work: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
    """Block this (non-lane) thread until `work` is done on the lane."""
    return asyncio.run_coroutine_threadsafe(work, lane_loop()).result(timeout)
