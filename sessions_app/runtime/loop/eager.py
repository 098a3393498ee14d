"""A task whose first step runs at once, in the call that starts it (docs/design.md §26).

`asyncio.create_task` puts a task's first step at the back of the loop's ready queue. Under
a storm of streamed answers the queue is a pass of hundreds of callbacks, 0.1–0.5 s of
work: a new turn's task, started by the frame that asked for it, took its first step (its
store thread's request) that long after the frame was read, and the model call's task
opened its connection one pass late again (docs/performance.md). Python 3.12 has this as
`eager_start`: the coroutine runs until its first real wait inside `start_task`, and only
what comes after that wait goes through the queue.

On Python 3.11 the same is made of the public pieces: the coroutine's first step is taken
here, with the new task as the loop's current task (so `asyncio.current_task`, timeouts and
cancellation see the task they expect) and in the task's context; the task then drives the
rest of it. The task's own first step only hands the awaited future to the task, so it is
moved to the front of the queue: the task is waiting on that future by the time anything
else runs. On a loop that is not asyncio's own, the move is left out (the task still took
its first step at once).
"""

from __future__ import annotations

import asyncio
import contextvars
import sys
import types
from asyncio.tasks import _enter_task, _leave_task
from collections import deque
from collections.abc import Coroutine
from typing import Any


def start_task(
    coro: Coroutine,
    *,
    context: contextvars.Context | None = None,
    loop: asyncio.AbstractEventLoop | None = None,
) -> asyncio.Task:
    """A task running `coro`, whose first step has run when this returns (or has raised:
    the task holds the error, as any task would)."""
    loop = loop or asyncio.get_running_loop()
    if sys.version_info >= (3, 12):
        return asyncio.Task(coro, loop=loop, context=context, eager_start=True)
    context = context if context is not None else contextvars.copy_context()
    first = _FirstStep()
    resumed = _resumed(coro, first)
    resumed.send(None)  # to its pause, before the first step (see _driving)
    task = asyncio.Task(resumed, loop=loop, context=context)
    _to_the_front(loop, task)
    current = asyncio.current_task(loop)
    if current is not None:
        _leave_task(loop, current)
    _enter_task(loop, task)
    try:
        first.awaited = context.run(coro.send, None)
    except StopIteration as returned:
        first.returned, first.done = returned.value, True
    except BaseException as error:  # noqa: BLE001 - the task's outcome, raised where it is awaited
        first.error, first.done = error, True
    finally:
        _leave_task(loop, task)
        if current is not None:
            _enter_task(loop, current)
    return task


class _FirstStep:
    __slots__ = ("awaited", "returned", "error", "done")

    def __init__(self):
        self.awaited: Any = None
        self.returned: Any = None
        self.error: BaseException | None = None
        self.done = False


async def _resumed(coro: Coroutine, first: _FirstStep) -> Any:
    return await _driving(coro, first)


@types.coroutine
def _driving(coro: Coroutine, first: _FirstStep):
    """Drives `coro` from where its first step left it, as `await coro` would have."""
    thrown: BaseException | None = None
    try:
        # Paused here before the first step is taken, so that a task cancelled before it
        # took over the wait still reaches the coroutine (an unstarted one would not run).
        yield
    except GeneratorExit:
        coro.close()
        raise
    except BaseException as error:  # noqa: BLE001 - passed on to the coroutine
        thrown = error
    if first.error is not None:
        error, first.error = first.error, None
        raise error
    if first.done:
        return first.returned
    awaited, first.awaited = first.awaited, None
    while True:
        if thrown is not None:
            if isinstance(thrown, asyncio.CancelledError) and isinstance(awaited, asyncio.Future):
                # Cancelled before the task took over the wait: what it waited on is
                # cancelled too, as a task's cancel does to the future it awaits.
                awaited.cancel()
            error, thrown = thrown, None
            try:
                awaited = coro.throw(error)
            except StopIteration as returned:
                return returned.value
            continue
        try:
            sent = yield awaited
        except GeneratorExit:
            coro.close()
            raise
        except BaseException as error:  # noqa: BLE001 - passed on to the coroutine
            thrown = error
            continue
        try:
            awaited = coro.send(sent)
        except StopIteration as returned:
            return returned.value


def _to_the_front(loop: asyncio.AbstractEventLoop, task: asyncio.Task) -> None:
    """Moves the task's just-scheduled first step to the front of the ready queue."""
    ready = getattr(loop, "_ready", None)
    if not isinstance(ready, deque) or not ready:
        return
    handle = ready[-1]
    if getattr(getattr(handle, "_callback", None), "__self__", None) is task:
        ready.pop()
        ready.appendleft(handle)


def request_bodies_sent_at_once(loop: asyncio.AbstractEventLoop) -> None:
    """On Python 3.11, aiohttp sends a request's body from a task of its own (3.12 and later
    start that task eagerly, aiohttp's own choice): one pass of a busy loop between a model
    request's headers and its body, for every model call. This loop's tasks of that one
    coroutine start eagerly too."""
    if sys.version_info >= (3, 12):
        return
    try:
        from aiohttp.client_reqrep import ClientRequest
    except ImportError:
        return
    started_at_once(loop, ClientRequest.write_bytes)


def started_at_once(loop: asyncio.AbstractEventLoop, *functions) -> None:
    """The loop's tasks of these coroutine functions start eagerly; every other task is
    made as before. A loop with a task factory of its own is left alone."""
    if loop.get_task_factory() is not None:
        return
    codes = {function.__code__ for function in functions}

    def task_factory(loop, coro, context=None):
        if getattr(coro, "cr_code", None) in codes:
            return start_task(coro, context=context, loop=loop)
        return asyncio.Task(coro, loop=loop, context=context)

    loop.set_task_factory(task_factory)


# Set in the context of a turn started at once (`Spacing` allowed it): its model requests
# start in the call that makes them too (runtime.tools.base.TurnAbort.race).
AT_ONCE: contextvars.ContextVar[bool] = contextvars.ContextVar("jarvis_at_once", default=False)


class Spacing:
    """At most one yes per `interval` seconds (of the loop's clock): the share of the loop a
    lane ahead of the queue may take. A burst of prompts gets one turn started at once, and
    the rest wait their pass as before: started all at once, a burst's starts pushed the
    streaming of the answers already under way back by seconds (docs/performance.md)."""

    def __init__(self, interval: float):
        self.interval = interval
        self.next_at = float("-inf")

    def take(self, now: float) -> bool:
        if now < self.next_at:
            return False
        self.next_at = now + self.interval
        return True
