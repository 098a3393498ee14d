"""The running event loop, without a system call per ask.

On Python 3.11 `asyncio.get_running_loop()` compares the loop's process id with `getpid()`
on every call (a fork's child must not use its parent's loop), and a system call costs
about a microsecond on this project's machines: asked for every streamed piece and every
frame of every turn, it was 5% of a storm's worker CPU (docs/performance-log.md).
"""

from __future__ import annotations

import asyncio
import threading

_get_ident = threading.get_ident
_last: list[asyncio.AbstractEventLoop | None] = [None]  # the loop found last: the worker's


def running_loop() -> asyncio.AbstractEventLoop:
    """What `asyncio.get_running_loop()` returns (RuntimeError outside a running loop).

    The loop found last is the answer while it runs in this thread (a thread runs one loop
    at a time, and asyncio notes which thread runs it); otherwise asyncio is asked. A
    forked child asks asyncio: its thread is another."""
    loop = _last[0]
    if loop is not None and getattr(loop, "_thread_id", None) == _get_ident():
        return loop
    loop = asyncio.get_running_loop()
    _last[0] = loop
    return loop
