"""The tools a model may call, and how one call is run.

A tool's `run(context, arguments)` returns the result text or raises: `ToolAborted` when the
user stopped the turn, any other exception for a failure. Either way the call gets a result
entry (docs/design.md §5.3); the exception text is what the model reads.
"""

from __future__ import annotations

import ast
import asyncio
import concurrent.futures
import json
import logging
import operator
import threading
from collections.abc import Awaitable, Callable, Coroutine
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, TypeVar

from sessions_app.runtime.eager import AT_ONCE, start_task
from sessions_app.runtime.executors import in_pool
from sessions_app.runtime.loop_lane import FirstFuture, call_first_threadsafe
from sessions_app.runtime.providers.base import ToolSpec

logger = logging.getLogger(__name__)

T = TypeVar("T")

ABORTED_RESULT_TEXT = "aborted: the user stopped the turn before this tool finished"
MAX_WAIT_SEC = 300
DELEGATE = "delegate"


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
        the loop's waiting work (runtime.loop_lane), and the call is cancelled and left to
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
        Stop leaves the work to the caller (runtime.executors.start_in_pool)."""
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
        # returns, not a pass of the loop later (runtime.eager). Never once a Stop came: the
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


@dataclass(frozen=True)
class ToolOutput:
    """A result with facts beside its text, kept in the result entry's `data` (what a
    sandbox run changed in the workspace, the files it made: docs/design.md §28)."""

    text: str
    data: dict


@dataclass(frozen=True)
class Tool:
    """A tool. `run` blocks (turns run it in the tool pool); a tool that only waits gives
    `arun`, a coroutine, instead and holds no thread while it waits. Either returns the
    result's text, or a ToolOutput."""

    name: str
    description: str
    parameters: dict
    run: Callable[[ToolContext, dict], str | ToolOutput] | None = None
    arun: Callable[[ToolContext, dict], Awaitable[str | ToolOutput]] | None = None
    # The call runs only after the person allows it (runtime.approvals).
    needs_approval: bool = False

    def spec(self) -> ToolSpec:
        return ToolSpec(name=self.name, description=self.description, parameters=self.parameters)


# --- calculator: arithmetic without eval ----------------------------------------------------
_BINARY = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY = {ast.UAdd: operator.pos, ast.USub: operator.neg}


def _evaluate(node: ast.AST) -> float | int:
    if isinstance(node, ast.Expression):
        return _evaluate(node.body)
    if isinstance(node, ast.Constant) and type(node.value) in {int, float}:
        return node.value
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _UNARY[type(node.op)](_evaluate(node.operand))
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _evaluate(node.left), _evaluate(node.right)
        if isinstance(node.op, ast.Pow) and abs(right) > 100:
            raise ValueError("exponent too large")  # 9**9**9 would hang the worker
        return _BINARY[type(node.op)](left, right)
    raise ValueError("only numbers and + - * / // % ** ( ) are allowed")


def calculate(expression: str) -> str:
    text = expression.replace("^", "**").replace("×", "*").replace("÷", "/")
    try:
        value = _evaluate(ast.parse(text, mode="eval"))
    except SyntaxError as error:
        raise ValueError(f"not an arithmetic expression: {expression!r}") from error
    except ZeroDivisionError as error:
        raise ValueError("division by zero") from error
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        value = int(value)
    elif isinstance(value, float):
        value = round(value, 10)
    return str(value)


def _calculator(context: ToolContext, arguments: dict) -> str:
    return calculate(str(arguments.get("expression", "")))


def _clock(context: ToolContext, arguments: dict) -> str:
    return datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S UTC (%A)")


async def _wait(context: ToolContext, arguments: dict) -> str:
    seconds = float(arguments.get("seconds", 1))
    if not 0 <= seconds <= MAX_WAIT_SEC:
        raise ValueError(f"seconds must be between 0 and {MAX_WAIT_SEC}")
    # Returns as soon as abort is set: the tool stops within milliseconds, and no thread
    # waits with it.
    if await context.abort.wait_async(seconds):
        raise ToolAborted(ABORTED_RESULT_TEXT)
    return f"waited {seconds:g} second{'' if seconds == 1 else 's'}"


# Every tool an agent may name. The runtime's own are listed here; a tool whose body lives
# above the runtime is added with `tool_register` in an AppConfig.ready (sessions_app:
# delegate, from runtime.delegation; memory_app: remember, recall, forget; notices_app:
# schedule, unschedule), so the runtime runs it without importing the code it calls.
TOOLS: dict[str, Tool] = {
    tool.name: tool
    for tool in [
        Tool(
            "calculator",
            "Evaluate an arithmetic expression exactly, e.g. '2+3*4' or '(1.5+2)**2'.",
            {
                "type": "object",
                "properties": {"expression": {"type": "string"}},
                "required": ["expression"],
            },
            _calculator,
        ),
        Tool(
            "clock",
            "The current date and time (UTC).",
            {"type": "object", "properties": {}},
            _clock,
        ),
        Tool(
            "wait",
            "Wait the given number of seconds, then report it. Stops early if the user aborts.",
            {
                "type": "object",
                "properties": {"seconds": {"type": "number"}},
                "required": ["seconds"],
            },
            arun=_wait,
        ),
    ]
}


def tool_register(tool: Tool) -> None:
    """Make `tool` available to agents under its name (called from an AppConfig.ready).

    Registering the same tool again is harmless (Django may run `ready` again when a test
    swaps the installed apps); a different tool under a taken name is a mistake that would
    silently change what a model's call runs, so it raises.
    """
    registered = TOOLS.get(tool.name)
    if registered is not None and registered != tool:
        raise ValueError(f"a different tool is already registered as {tool.name!r}")
    TOOLS[tool.name] = tool


def _prepared(call: dict, tools: dict[str, Tool]) -> tuple[Tool | None, dict, str]:
    """The tool and its arguments, or the error text the call's result must say."""
    tool = tools.get(call["name"])
    if tool is None:
        return (
            None,
            {},
            f"unknown tool {call['name']!r}: no executor is registered for it "
            f"(available: {', '.join(sorted(tools)) or 'none'})",
        )
    try:
        arguments = json.loads(call["arguments"] or "{}")
        if not isinstance(arguments, dict):
            raise ValueError("arguments must be a JSON object")
    except ValueError as error:
        return tool, {}, f"invalid arguments for {tool.name}: {error}"
    return tool, arguments, ""


async def tool_run(
    *, call: dict, context: ToolContext, tools: dict[str, Tool]
) -> tuple[str | ToolOutput, bool]:
    """Run one call; return (result text or ToolOutput, is_error). Never raises for the
    call's own faults.

    A blocking tool runs in the bounded tool pool; a waiting tool is awaited here.
    """
    tool, arguments, error = _prepared(call, tools)
    if error:
        return error, True
    if context.abort.is_set():
        return ABORTED_RESULT_TEXT, True
    if tool.needs_approval:
        if context.approve is None:
            return f"{tool.name} needs the person's approval, and nobody can be asked here", True
        refusal = await context.approve(call, arguments)
        if refusal is not None:
            return refusal, True
    try:
        if tool.arun is not None:
            return await tool.arun(context, arguments), False
        return await in_pool("tools", tool.run, context, arguments), False
    except ToolAborted as aborted:
        return str(aborted), True
    except Exception as error:  # noqa: BLE001 - a tool's failure is a result the model reads
        # The error may quote the call's arguments (the person's words): its type only.
        logger.info("tool %s failed: %s", tool.name, type(error).__name__)
        return f"{tool.name} failed: {error}", True
