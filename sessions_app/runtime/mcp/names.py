"""The names MCP tools are offered under: `mcp__<server>__<tool>` (docs/design.md §31).

OpenAI and Anthropic take tool names of 1-64 letters, digits, `_` and `-`. A server's own
tool name may hold anything, so other characters become `_`; a name still too long, or one
that now collides with another of the server's tools, is cut and given the first hex digits
of its original name's SHA-256, so each offered name stays one tool's, the same every time.
"""

from __future__ import annotations

import hashlib
import re

PREFIX = "mcp"
SEPARATOR = "__"
MAX_NAME_CHARS = 64
_OUTSIDE = re.compile(r"[^A-Za-z0-9_-]")
_DIGEST_CHARS = 8


def _with_digest(stem: str, original: str) -> str:
    digest = hashlib.sha256(original.encode()).hexdigest()[:_DIGEST_CHARS]
    return f"{stem[: MAX_NAME_CHARS - _DIGEST_CHARS - 1]}_{digest}"


def offered_names(server: str, tools: list[str]) -> dict[str, str]:
    """Offered name -> the server's own name, for the server's tools in their listed order."""
    head = f"{PREFIX}{SEPARATOR}{server}{SEPARATOR}"
    offered: dict[str, str] = {}
    for tool in tools:
        name = head + _OUTSIDE.sub("_", tool)
        if name != head + tool or len(name) > MAX_NAME_CHARS or name in offered:
            name = _with_digest(name, tool)
        offered[name] = tool
    return offered


def server_of(name: str) -> str | None:
    """The server a name offered by `offered_names` belongs to (None for other tools)."""
    prefix, _, rest = name.partition(SEPARATOR)
    if prefix != PREFIX or not rest:
        return None
    server, _, tool = rest.partition(SEPARATOR)
    return server if server and tool else None
