"""The agent's working-memory tools: `remember`, `recall` and `forget` (docs/design.md §9).

Registered with the runtime's tool registry in MemoryAppConfig.ready; each runs one
working-memory service for the session of the turn that calls it.
"""

from __future__ import annotations

import json

from memory_app.services import (
    working_memory_forget,
    working_memory_recall,
    working_memory_remember,
)
from sessions_app.services.extensions import Tool, ToolContext


def _remember(context: ToolContext, arguments: dict) -> str:
    key = str(arguments.get("key", "")).strip()
    value = str(arguments.get("value", "")).strip()
    if not key:
        raise ValueError("remember needs a key")
    with context.fenced():
        working_memory_remember(
            session_id=context.session_id, key=key, value=value, owner_id=context.owner_id
        )
    return f"remembered: {key} = {value}"


def _recall(context: ToolContext, arguments: dict) -> str:
    key = str(arguments.get("key") or "").strip() or None
    memory = working_memory_recall(session_id=context.session_id, key=key)
    if key is not None:
        if key in memory:
            return f"{key} = {memory[key]}"
        return f"nothing is remembered under {key!r}"
    return json.dumps(memory, ensure_ascii=False) if memory else "working memory is empty"


def _forget(context: ToolContext, arguments: dict) -> str:
    key = str(arguments.get("key", "")).strip()
    if not key:
        raise ValueError("forget needs a key")
    with context.fenced():
        forgotten = working_memory_forget(session_id=context.session_id, key=key)
    return f"forgot {key}" if forgotten else f"nothing is remembered under {key!r}"


WORKING_MEMORY_TOOLS = (
    Tool(
        "remember",
        "Store a fact about the user in this conversation's working memory.",
        {
            "type": "object",
            "properties": {"key": {"type": "string"}, "value": {"type": "string"}},
            "required": ["key", "value"],
        },
        _remember,
    ),
    Tool(
        "recall",
        "Read a fact (or, without a key, everything) from working memory.",
        {"type": "object", "properties": {"key": {"type": "string"}}},
        _recall,
    ),
    Tool(
        "forget",
        "Delete a fact from working memory. The person is asked first.",
        {"type": "object", "properties": {"key": {"type": "string"}}, "required": ["key"]},
        _forget,
        needs_approval=True,
    ),
)
