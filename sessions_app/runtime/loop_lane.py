"""Control before data in the event loop itself (docs/design.md §26).

asyncio runs, in each pass of its loop, every callback that was ready when the pass began,
in the order they became ready. Under a storm of streaming turns a pass is hundreds of
callbacks (model pieces read, frames written) and takes 0.2–0.5 s; a pool thread's result
waits for the next pass to be copied into the awaiting future, and the waiting task steps
one pass after that. A Stop's closing or a new turn's start waited 0.7 s there, on two
workers, for work that took 0.1 s in its thread.

- `wait_first` awaits a pool thread's work and resumes the awaiting task as soon as the
  thread is done: a callback put at the front of the loop's ready queue (it runs next, in
  the pass under way) marks the future done and steps its task right there.
- `cancel_first` cancels a task (a Stop cancelling its turn's wait for the model) and moves
  what that schedules (the callbacks of the future it waited on, its step among them, in
  their order) to the front of that queue: the turn ends in the pass that read the Stop.

Only the loop asyncio implements keeps that queue (`_ready`); on another loop both work the
usual way. Nothing else in the queue changes places.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import itertools
from collections import deque
from collections.abc import Callable
from typing import Any


def call_first_threadsafe(loop: asyncio.AbstractEventLoop, callback: Callable, *args) -> None:
    """`loop.call_soon_threadsafe`, but ahead of every callback already waiting to run. From
    any thread; nothing happens once the loop is closed."""
    ready = getattr(loop, "_ready", None)
    try:
        if not isinstance(ready, deque):
            loop.call_soon_threadsafe(callback, *args)
            return
        # A single appendleft: the order of everything else in the queue is untouched.
        ready.appendleft(asyncio.Handle(callback, args, loop, None))
        # Wakes the loop if it sleeps in its selector (it had nothing ready).
        loop.call_soon_threadsafe(_nothing)
    except RuntimeError:
        pass  # the loop is closed: nobody awaits the result any more


def _nothing() -> None:
    pass


def cancel_first(task: asyncio.Task) -> None:
    """`task.cancel()`, from the task's loop, with what the cancellation schedules run ahead
    of the callbacks already waiting: every callback of the future the task waits on (in
    their order: the loop's own clean-up of a socket's wait comes before the task's step,
    which may close that socket and free its descriptor for another), the task's step last."""
    loop = task.get_loop()
    ready = getattr(loop, "_ready", None)
    waiter = getattr(task, "_fut_waiter", None)
    if not isinstance(ready, deque) or waiter is None:
        task.cancel()  # nothing waits to be moved: a task already due steps where it is
        return
    before = len(ready)
    task.cancel()
    # The future's callbacks, scheduled by cancel() at the back (each called with the
    # future); other threads may have appended meanwhile, and theirs stay where they are.
    # (A thread's appendleft meanwhile shifts the queue by one: one more is looked at.)
    newest = itertools.islice(reversed(ready), len(ready) - before + 1)
    scheduled = [
        handle
        for handle in newest
        if handle._args is not None and len(handle._args) == 1 and handle._args[0] is waiter
    ]
    for handle in scheduled:  # newest first: each goes in front of the one after it
        moved = asyncio.Handle(handle._callback, handle._args, loop, handle._context)
        handle.cancel()  # (it forgets its callback)
        ready.appendleft(moved)


class _FirstFuture(asyncio.Future):
    """A future whose waiting tasks step in the callback that resolves it, not one pass
    later (a plain future schedules them at the back of the ready queue)."""

    def __init__(self, *, loop: asyncio.AbstractEventLoop):
        super().__init__(loop=loop)
        self._waiting: list[tuple[Callable, contextvars.Context | None]] = []

    def add_done_callback(self, fn, *, context=None) -> None:
        if self.done():
            super().add_done_callback(fn, context=context)
        else:
            self._waiting.append((fn, context))

    def remove_done_callback(self, fn) -> int:
        kept = [(f, c) for f, c in self._waiting if f != fn]
        removed = len(self._waiting) - len(kept)
        self._waiting = kept
        return removed + super().remove_done_callback(fn)

    def cancel(self, msg: Any = None) -> bool:
        if not super().cancel(msg):
            return False
        # A cancellation has no hurry: its waiters step the usual way.
        waiting, self._waiting = self._waiting, []
        for fn, context in waiting:
            self.get_loop().call_soon(fn, self, context=context)
        return True

    def settle_from(self, done: concurrent.futures.Future) -> None:
        """On the loop: take `done`'s outcome and step the waiting tasks now."""
        if self.done():
            return  # cancelled meanwhile
        if done.cancelled():
            self.cancel()
            return
        error = done.exception()
        if error is not None:
            self.set_exception(error)
        else:
            self.set_result(done.result())
        waiting, self._waiting = self._waiting, []
        for fn, context in waiting:
            try:
                if context is None:
                    fn(self)
                else:
                    context.run(fn, self)
            except Exception as failure:  # noqa: BLE001 - as the loop itself reports them
                self.get_loop().call_exception_handler(
                    {"message": "a callback of a pool result failed", "exception": failure}
                )


async def wait_first(done: concurrent.futures.Future) -> Any:
    """Await a pool thread's future; the caller resumes as soon as it is done (see above).
    Cancelling the caller cancels the work if it has not started, as `wrap_future` does."""
    loop = asyncio.get_running_loop()
    waiter = _FirstFuture(loop=loop)

    def on_done(finished: concurrent.futures.Future) -> None:  # in the pool's thread
        call_first_threadsafe(loop, waiter.settle_from, finished)

    done.add_done_callback(on_done)
    try:
        return await waiter
    except asyncio.CancelledError:
        done.cancel()
        raise
