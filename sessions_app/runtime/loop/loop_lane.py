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
- `FirstFuture.settle`, called at the front of that queue (`call_first_threadsafe`), resumes
  the tasks awaiting the future in that callback: a Stop's turn goes on before the rest of
  the pass (runtime.tools.base.TurnAbort.race).

Only the loop asyncio implements keeps that queue (`_ready`); on another loop both work the
usual way. Nothing else in the queue changes places.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
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


class FirstFuture(asyncio.Future):
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
        if done.cancelled():
            self.cancel()
            return
        self.settle(done.result() if done.exception() is None else None, done.exception())

    def settle(self, result: Any = None, error: BaseException | None = None) -> None:
        """On the loop, in a callback (not inside a task's step: a task cannot step inside
        another's): the outcome, and the waiting tasks step now. Nothing once done."""
        if self.done():
            return  # cancelled meanwhile, or settled already
        if error is not None:
            self.set_exception(error)
        else:
            self.set_result(result)
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
    waiter = FirstFuture(loop=loop)

    def on_done(finished: concurrent.futures.Future) -> None:  # in the pool's thread
        call_first_threadsafe(loop, waiter.settle_from, finished)

    done.add_done_callback(on_done)
    try:
        return await waiter
    except asyncio.CancelledError:
        done.cancel()
        raise
