"""What a tool is and what it is handed: the `Tool` a model may call, the `ToolContext` of one
call, and the turn's abort flag (`TurnAbort`) a tool waits on.

A tool's `run(context, arguments)` returns the result text (or a `ToolOutput`, when the call
also kept files to show the person) or raises: `ToolAborted` when the
user stopped the turn, any other exception for a failure. Either way the call gets a result
entry (docs/design.md §5.3); the exception text is what the model reads.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Awaitable, Callable, Coroutine
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from typing import Any, TypeVar

from sessions_app.runtime.loop.eager import AT_ONCE, start_task
from sessions_app.runtime.loop.loop_lane import FirstFuture, call_first_threadsafe
from sessions_app.runtime.providers.base import ToolSpec

T = TypeVar("T")

ABORTED_RESULT_TEXT = "aborted: the user stopped the turn before this tool finished"


class ToolAborted(Exception):
    """The turn was aborted while the tool ran."""


class TurnAbort:
    """A turn's abort flag: set from any thread, waited on by threads and by coroutines."""

    def __init__(self):
        self._flag = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._event: asyncio.Event | None = None
        self._race: _Race | None = None

    def is_set(self) -> bool:
        return self._flag.is_set()

    def set(self) -> None:
        self._flag.set()
        loop, event = self._loop, self._event
        if loop is not None and event is not None:
            try:
                loop.call_soon_threadsafe(event.set)
            except RuntimeError:  # the loop has closed: nobody awaits any more
                pass
        race = self._race
        if race is not None:
            race.stop()

    async def race(self, call: Coroutine[Any, Any, T]) -> tuple[bool, T | None]:
        """Run `call` (a model's answer; a turn's start waiting for a store thread) in a task
        of its own until it ends: `(False, its result)`, or its error raised. Once the flag is
        set — already, or while it runs — `(True, None)` at once: the caller resumes ahead of
        the loop's waiting work (runtime.loop.loop_lane), and the call is cancelled and left to
        unwind by itself.

        A Stop does not wait for the model's next piece, nor for the clean-up of a request
        cancelled mid-way (the SDK's and aiohttp's way out awaits, and each await is a pass
        of a busy event loop: 0.05–0.2 s in all in a storm of streamed answers,
        docs/performance.md).
        Cancelling the caller cancels the call."""
        loop = asyncio.get_running_loop()
        eager = AT_ONCE.get() and not self._flag.is_set()
        return await self._racing(_RaceCall(loop, call, eager=eager))

    async def race_done(self, done: concurrent.futures.Future) -> tuple[bool, Any]:
        """`race` for work a pool thread runs (a turn's start): no task of its own, the caller
        resumes in the callback the thread's end puts at the front of the loop's queue. A
        Stop leaves the work to the caller (runtime.loop.executors.start_in_pool)."""
        return await self._racing(_RaceDone(asyncio.get_running_loop(), done))

    async def _racing(self, race: _Race) -> tuple[bool, Any]:
        self._race = race
        if self._flag.is_set():
            race.stop()
        try:
            return await race.outcome
        finally:
            self._race = None
            race.let_go()

    def wait(self, timeout: float | None = None) -> bool:
        """Block this thread until set (True) or `timeout` passes (False)."""
        return self._flag.wait(timeout)

    async def wait_async(self, timeout: float | None) -> bool:
        """Wait without holding a thread until set (True) or `timeout` passes (False)."""
        if self._event is None:
            self._loop, self._event = asyncio.get_running_loop(), asyncio.Event()
        if self._flag.is_set():
            return True
        try:
            await asyncio.wait_for(self._event.wait(), timeout)
        except TimeoutError:
            return self._flag.is_set()
        return True


class _Race:
    """The outcome a racing caller awaits: the work's, or a Stop's, whichever comes first.
    Both are settled at the front of the loop's queue, in a callback: a task cannot resume
    another inside its own step."""

    def __init__(self, loop: asyncio.AbstractEventLoop):
        self.loop = loop
        self.outcome = FirstFuture(loop=loop)

    def finished(self, result: Any = None, error: BaseException | None = None) -> None:
        """From any thread: the work is done."""
        outcome = None if error is not None else (False, result)
        call_first_threadsafe(self.loop, self.outcome.settle, outcome, error)

    def stop(self) -> None:
        """From any thread, the loop's included."""
        call_first_threadsafe(self.loop, self.outcome.settle, (True, None))

    def let_go(self) -> None:
        """The caller has its outcome."""


class _RaceDone(_Race):
    """A pool thread's work: its end settles the outcome from the thread."""

    def __init__(self, loop: asyncio.AbstractEventLoop, done: concurrent.futures.Future):
        super().__init__(loop)
        done.add_done_callback(self._done)

    def _done(self, done: concurrent.futures.Future) -> None:
        if done.cancelled():
            return  # withdrawn after a Stop: the caller has its outcome already
        self.finished(done.result() if done.exception() is None else None, done.exception())


class _RaceCall(_Race):
    """A call in a task of its own."""

    def __init__(self, loop: asyncio.AbstractEventLoop, call: Coroutine, *, eager: bool):
        super().__init__(loop)
        self.call = call
        self.started = False
        # Eager, in a turn started at once: the call (a model request) is under way when this
        # returns, not a pass of the loop later (runtime.loop.eager). Never once a Stop came: the
        # call then never begins.
        self.task = start_task(self._run(), loop=loop) if eager else loop.create_task(self._run())

    async def _run(self) -> None:
        self.started = True
        try:
            result = await self.call
        except asyncio.CancelledError:
            raise  # let go of: the caller has its outcome
        except Exception as error:  # noqa: BLE001 - the caller's to raise (or, once stopped, nobody's)
            self.finished(error=error)
        else:
            self.finished(result)

    def let_go(self) -> None:
        if not self.task.done():
            self.task.cancel()
        if not self.started:
            self.call.close()  # stopped before it began: it never will


@dataclass(frozen=True)
class ToolContext:
    session_id: str
    abort: TurnAbort = field(default_factory=TurnAbort)
    # Wraps a tool's writes outside the conversation (memory rows): inside it, the session
    # is still the one the turn started on and cannot be deleted.
    fenced: Callable[[], AbstractContextManager] = nullcontext
    # Asks the person about a call of a `needs_approval` tool and waits (holding no thread):
    # `await approve(call, arguments)` is None when allowed, else the call's error text.
    approve: Callable[[dict, dict], Awaitable[str | None]] | None = None
    # Whose session it is: files a tool keeps (an MCP server's images) count for them.
    owner_id: int | None = None


@dataclass(frozen=True)
class ToolOutput:
    """A call's result: the text the model reads, and files kept for the person (refs like a
    user message's `data.attachments`, shown in the page with the result)."""

    text: str
    is_error: bool = False
    files: tuple[dict, ...] = ()
    # Other facts the result entry's `data` keeps beside `files` (a sandbox run's
    # `workspace` changes: docs/design.md §28).
    data: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Tool:
    """A tool. `run` blocks (turns run it in the tool pool); a tool that only waits gives
    `arun`, a coroutine, instead and holds no thread while it waits."""

    name: str
    description: str
    parameters: dict
    run: Callable[[ToolContext, dict], str] | None = None
    arun: Callable[[ToolContext, dict], Awaitable[str | ToolOutput]] | None = None
    # The call runs only after the person allows it (runtime.turn.approvals).
    needs_approval: bool = False

    def spec(self) -> ToolSpec:
        return ToolSpec(name=self.name, description=self.description, parameters=self.parameters)
