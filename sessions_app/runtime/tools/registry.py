"""Every tool an agent may name (`TOOLS`), and how one call is run (`tool_run`)."""

from __future__ import annotations

import json
import logging

from sessions_app.runtime.loop.executors import in_pool
from sessions_app.runtime.tools.base import (
    ABORTED_RESULT_TEXT,
    Tool,
    ToolAborted,
    ToolContext,
    ToolOutput,
)
from sessions_app.runtime.tools.builtin import BUILTIN_TOOLS

logger = logging.getLogger(__name__)

DELEGATE = "delegate"

# Every tool an agent may name. The runtime's own are listed in runtime.tools.builtin; a tool
# whose body lives above the runtime is added with `tool_register` in an AppConfig.ready
# (sessions_app: delegate, from services.delegation; memory_app: remember, recall, forget;
# notices_app: schedule, unschedule), so the runtime runs it without importing the code it calls.
TOOLS: dict[str, Tool] = {tool.name: tool for tool in BUILTIN_TOOLS}


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


async def tool_run(*, call: dict, context: ToolContext, tools: dict[str, Tool]) -> tuple[str, bool]:
    """`tool_output`'s (result text, is_error)."""
    output = await tool_output(call=call, context=context, tools=tools)
    return output.text, output.is_error


async def tool_output(*, call: dict, context: ToolContext, tools: dict[str, Tool]) -> ToolOutput:
    """Run one call; return its result. Never raises for the call's own faults.

    A blocking tool runs in the bounded tool pool; a waiting tool is awaited here.
    """
    tool, arguments, error = _prepared(call, tools)
    if error:
        return ToolOutput(error, is_error=True)
    if context.abort.is_set():
        return ToolOutput(ABORTED_RESULT_TEXT, is_error=True)
    if tool.needs_approval:
        if context.approve is None:
            return ToolOutput(
                f"{tool.name} needs the person's approval, and nobody can be asked here",
                is_error=True,
            )
        refusal = await context.approve(call, arguments)
        if refusal is not None:
            return ToolOutput(refusal, is_error=True)
    try:
        if tool.arun is not None:
            result = await tool.arun(context, arguments)
        else:
            result = await in_pool("tools", tool.run, context, arguments)
    except ToolAborted as aborted:
        return ToolOutput(str(aborted), is_error=True)
    except Exception as error:  # noqa: BLE001 - a tool's failure is a result the model reads
        # The error may quote the call's arguments (the person's words): its type only.
        logger.info("tool %s failed: %s", tool.name, type(error).__name__)
        return ToolOutput(f"{tool.name} failed: {error}", is_error=True)
    return result if isinstance(result, ToolOutput) else ToolOutput(result)
