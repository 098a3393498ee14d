"""The runtime's own tools: a calculator (arithmetic without eval), the clock, and a wait that
stops as soon as the turn is aborted."""

from __future__ import annotations

import ast
import operator
from datetime import UTC, datetime

from sessions_app.runtime.tools.base import ABORTED_RESULT_TEXT, Tool, ToolAborted, ToolContext

MAX_WAIT_SEC = 300


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
