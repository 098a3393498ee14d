"""The bounded thread pools an asynchronous turn hands its blocking work to.

A turn spends almost all of its time waiting for the model, which holds no thread (the SDKs'
async clients). What blocks — a store write, a tool — runs in one of these pools, so a worker
with hundreds of turns in flight uses a few threads and a few database connections:

- `store`: the session store and memory writes; its size bounds the database connections
  turns use at once;
- `tools`: tools that block (waiting tools are coroutines and use none);
- `control`: aborts, lease marks and an aborted turn's last writes, so that an abort never
  queues behind turn work;
- `sockets`: a WebSocket's own database work (its handshake's token, its registration and
  snapshot, its heartbeat, its removal), so that a hundred tabs reconnecting at once are
  served side by side and never wait behind turn work.

A pool thread keeps its database connection while work keeps coming and closes it when it
finds nothing more to do, so an idle worker holds no connection.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import os
import threading
from concurrent.futures import ThreadPoolExecutor

from asgiref.sync import async_to_sync, sync_to_async
from django.conf import settings
from django.db import connections


class ClosingExecutor(ThreadPoolExecutor):
    """A bounded pool whose threads close their database connections when it goes idle."""

    def __init__(self, max_workers: int, name: str):
        super().__init__(max_workers=max_workers, thread_name_prefix=name)
        self._pending = 0
        self._pending_lock = threading.Lock()

    def submit(self, fn, /, *args, **kwargs):
        with self._pending_lock:
            self._pending += 1
        return super().submit(self._run, fn, *args, **kwargs)

    def _run(self, fn, *args, **kwargs):
        try:
            return fn(*args, **kwargs)
        finally:
            with self._pending_lock:
                self._pending -= 1
                idle = self._pending == 0
            if idle:
                connections.close_all()


_pools: dict[tuple[int, str], ClosingExecutor] = {}
_pools_lock = threading.Lock()


def pool(name: str) -> ClosingExecutor:
    """The named pool of this process (a forked child makes its own)."""
    key = (os.getpid(), name)
    executor = _pools.get(key)
    if executor is None:
        with _pools_lock:
            executor = _pools.get(key)
            if executor is None:
                size = {
                    "store": settings.STORE_THREADS,
                    "tools": settings.TOOL_THREADS,
                    "control": 2,
                    "sockets": settings.SOCKET_THREADS,
                }[name]
                executor = _pools[key] = ClosingExecutor(size, f"jarvis-{name}")
    return executor


# Set while a synchronous caller (the HTTP API, a command, a test) waits for a turn: its
# blocking work then runs back in that caller's own thread, on its database connection and
# inside its transaction, as it would have without the event loop in between.
_in_caller_thread: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "in_caller_thread", default=False
)


def run_for_sync_caller(coroutine_function, /, **kwargs):
    """Run a coroutine function to its end from synchronous code (see _in_caller_thread)."""
    token = _in_caller_thread.set(True)
    try:
        return async_to_sync(coroutine_function)(**kwargs)
    finally:
        _in_caller_thread.reset(token)


def in_sync_caller() -> bool:
    """Whether the running coroutine serves a synchronous caller, whose event loop may end
    as soon as the call returns (so work that must outlive it cannot be left on it)."""
    return _in_caller_thread.get()


async def in_pool(name: str, function, /, *args, **kwargs):
    """Run blocking `function` in the named pool and await its result."""
    call = functools.partial(function, *args, **kwargs)
    if _in_caller_thread.get() and name != "control":
        return await sync_to_async(call, thread_sensitive=True)()
    loop = asyncio.get_running_loop()
    # run_in_executor does not carry context variables (sync_to_async does): the work runs
    # in a copy of the caller's context, so its log lines name the caller's turn.
    return await loop.run_in_executor(pool(name), contextvars.copy_context().run, call)
