"""The runtime's own tools: a calculator (arithmetic without eval, with a budget:
tools/arithmetic.py), the clock, and a wait that stops as soon as the turn is aborted."""

from __future__ import annotations

from datetime import UTC, datetime

from sessions_app.runtime.tools.arithmetic import calculate
from sessions_app.runtime.tools.base import ABORTED_RESULT_TEXT, Tool, ToolAborted, ToolContext

MAX_WAIT_SEC = 300


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


# The runtime's own tools (runtime.tools.registry lists them in TOOLS).
BUILTIN_TOOLS: list[Tool] = [
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
