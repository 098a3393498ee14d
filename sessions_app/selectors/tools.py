"""Every tool a turn may offer, built in and from MCP servers (`GET /api/tools/`, docs/design.md
§31)."""

from __future__ import annotations

from sessions_app.runtime.mcp.offer import mcp_offered, mcp_ready_blocking, mcp_servers_status
from sessions_app.runtime.sandbox.registry import sandbox_status
from sessions_app.runtime.tools.registry import TOOLS


def tools_offered() -> dict:
    """Tools (built-in first, by name; then MCP tools by server), the MCP servers' state and
    the sandbox's.
    MCP servers not yet listed by this process are listed now, each within its timeout."""
    mcp_ready_blocking()
    tools = [
        {
            "name": tool.name,
            "description": tool.description,
            "parameters": tool.parameters,
            "needs_approval": tool.needs_approval,
            "source": "builtin",
            "server": None,
        }
        for tool in sorted(TOOLS.values(), key=lambda tool: tool.name)
    ]
    tools += [
        {
            "name": item.tool.name,
            "description": item.tool.description,
            "parameters": item.tool.parameters,
            "needs_approval": item.tool.needs_approval,
            "source": "mcp",
            "server": item.server,
        }
        for item in mcp_offered()
    ]
    # Whether run_code is offered here, and why not (docs/design.md §28): the page says it.
    return {"tools": tools, "servers": mcp_servers_status(), "sandbox": sandbox_status().to_api()}
