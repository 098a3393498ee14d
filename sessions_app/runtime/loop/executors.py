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

A pool thread keeps its database connection while work keeps coming and closes it once it
has found nothing to do for POOL_IDLE_CLOSE_SEC, so an idle worker holds no connection, and
a storm's turns, whose writes come and go, do not open a connection for each of them.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import os
import queue
import threading
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor

from asgiref.sync import async_to_sync, sync_to_async
from django.conf import settings
from django.db import connections

from jarvis_site.shared.outages import database_away
from sessions_app.runtime.loop.eager import AT_ONCE
from sessions_app.runtime.loop.loop_lane import wait_first

# The lane `submit_first` or `submit_now` hands its work to (in the submitting thread).
_lane = threading.local()
REST, FIRST, NOW = 0, 1, 2


class _Lanes:
    """The pool's queue of work: what is submitted now goes ahead of everything, then what
    is submitted first, then the rest, each lane in order. ThreadPoolExecutor reads its
    queue with get / get_nowait only."""

    def __init__(self, idle_close_sec: float = 0.0):
        self._now: deque = deque()
        self._first: deque = deque()
        self._rest: deque = deque()
        self._ready = threading.Condition()
        self._idle_close_sec = idle_close_sec

    def put(self, item, block=True, timeout=None) -> None:  # noqa: ARG002 - never full
        lane = getattr(_lane, "lane", REST)
        with self._ready:
            (self._now if lane == NOW else self._first if lane == FIRST else self._rest).append(
                item
            )
            self._ready.notify()

    def put_nowait(self, item) -> None:
        self.put(item)

    def get(self, block=True, timeout=None):
        if block and timeout is None:
            # A pool thread asking for its next work (ThreadPoolExecutor's workers wait
            # without a timeout): after `idle_close_sec` without any (at once with 0), it
            # lets go of its database connection, then waits on. Each thread for itself: a
            # thread that finished while others still worked holds a connection too.
            with self._ready:
                if self._ready.wait_for(self._has_work, self._idle_close_sec):
                    return self._next()
            connections.close_all()
        with self._ready:
            if block and not self._ready.wait_for(self._has_work, timeout):
                raise queue.Empty
            return self._next()

    def _has_work(self) -> bool:
        return bool(self._now or self._first or self._rest)

    def _next(self):
        if self._now:
            return self._now.popleft()
        if self._first:
            return self._first.popleft()
        if self._rest:
            item = self._rest.popleft()
            if item is None:
                # The pool shuts down: its thread ends, and so does its connection.
                connections.close_all()
            return item
        raise queue.Empty

    def get_nowait(self):
        return self.get(block=False)


class ClosingExecutor(ThreadPoolExecutor):
    """A bounded pool whose threads close their database connections when it goes idle.

    `submit_first` puts work ahead of the queue: a new turn's start and a Stop's writes
    never wait behind the writes of turns already streaming (docs/design.md §26).
    `submit_now` puts it ahead of those starts too: a turn started at once (runtime.loop.eager's
    AT_ONCE, at most one per START_AT_ONCE_EVERY_SEC) does not wait behind a burst's."""

    def __init__(self, max_workers: int, name: str, idle_close_sec: float = 0.0):
        super().__init__(max_workers=max_workers, thread_name_prefix=name)
        self._work_queue = _Lanes(idle_close_sec)
        self._idle_close_sec = idle_close_sec
        self._pending = 0
        self._pending_lock = threading.Lock()

    def submit(self, fn, /, *args, **kwargs):
        with self._pending_lock:
            self._pending += 1
        return super().submit(self._run, fn, *args, **kwargs)

    def submit_first(self, fn, /, *args, **kwargs):
        return self._submit_in(FIRST, fn, *args, **kwargs)

    def submit_now(self, fn, /, *args, **kwargs):
        """Ahead of `submit_first`'s work too: the start of a turn started at once."""
        return self._submit_in(NOW, fn, *args, **kwargs)

    def _submit_in(self, lane: int, fn, /, *args, **kwargs):
        _lane.lane = lane
        try:
            return self.submit(fn, *args, **kwargs)
        finally:
            _lane.lane = REST

    def withdraw(self, future: Future) -> bool:
        """Cancel work submitted here that no thread has taken yet; False once one has."""
        if not future.cancel():
            return False
        with self._pending_lock:
            self._pending -= 1
        return True

    def _run(self, fn, *args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except Exception as error:
            if database_away(error):
                # Django opens a new connection only once the broken one is closed: the
                # thread's next work, after the outage, must not meet the dead one.
                connections.close_all()
            raise
        finally:
            with self._pending_lock:
                self._pending -= 1
                idle = self._pending == 0
            if idle and not self._idle_close_sec:
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
                executor = _pools[key] = ClosingExecutor(
                    size, f"jarvis-{name}", settings.POOL_IDLE_CLOSE_SEC
                )
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
    return await _in_pool(name, False, function, *args, **kwargs)


async def in_pool_first(name: str, function, /, *args, **kwargs):
    """`in_pool`, ahead of the work already waiting for the pool: for a new turn's start
    (its first model call must not wait behind other turns' writes)."""
    return await _in_pool(name, True, function, *args, **kwargs)


async def start_in_pool(abort, function, /, *args, **kwargs):
    """`in_pool_first("store", …)` for a turn's start, with the turn's abort flag: a Stop that
    comes while the work still waits for a store thread (behind a burst's other starts)
    moves it to the `control` pool, so the stopped turn stores its start, finds the Stop
    and ends at once, not after every start queued before it. Work a thread has taken
    stays there, and its caller resumes as soon as it is done."""
    race_done = getattr(abort, "race_done", None)
    if race_done is None or _in_caller_thread.get():
        return await in_pool_first("store", function, *args, **kwargs)
    call = functools.partial(function, *args, **kwargs)
    executor = pool("store")
    future = _submit_for(executor, True)(contextvars.copy_context().run, call)
    # The caller resumes as soon as the thread is done, or at once on a Stop (no pass).
    stopped, result = await race_done(future)
    if not stopped:
        return result
    if executor.withdraw(future):
        return await in_pool("control", call)
    return await wait_first(future)


def _submit_for(executor: ClosingExecutor, first: bool):
    """The executor's submit for work of a turn's start (`first`) or not. The start of a turn
    started at once (AT_ONCE) does not queue behind the starts of the burst around it."""
    if not first:
        return executor.submit
    return executor.submit_now if AT_ONCE.get() else executor.submit_first


async def _in_pool(name: str, first: bool, function, /, *args, **kwargs):
    call = functools.partial(function, *args, **kwargs)
    if _in_caller_thread.get() and name != "control":
        return await sync_to_async(call, thread_sensitive=True)()
    executor = pool(name)
    # run_in_executor does not carry context variables (sync_to_async does): the work runs
    # in a copy of the caller's context, so its log lines name the caller's turn.
    future = _submit_for(executor, first)(contextvars.copy_context().run, call)
    if name == "control" or (first and AT_ONCE.get()):
        # A Stop's work, or a turn started at once: its caller resumes as soon as the thread
        # is done, not two passes of a busy event loop later (runtime.loop.loop_lane). Only
        # these few calls: a storm's hundreds of starts resumed that way would delay
        # reading the sockets.
        return await wait_first(future)
    return await asyncio.wrap_future(future)
