"""MCP servers' tools as the tools of a turn (docs/design.md §31).

`mcp_ready()` is awaited before a turn's plan is made: every server whose tools this process
has not listed yet (or whose listing went stale) is connected and listed, side by side, each
within its `timeout_sec`; a server that fails is left out of this turn (its tools, when an
earlier listing had them, stay offered: their calls say why they fail). `mcp_tools()` then
gives, without waiting, the `Tool`s of every listing this process holds.

Trust and approval: a tool named in its server's `trusted_tools` runs without asking — as
the definition (description and schema) this process first saw of it. A trusted tool whose
definition changed since is a new tool and asks first, as every other tool does (§15). A call
allowed for one definition that finds another when it runs (the server changed it while the
person decided) is asked about again.
"""

from __future__ import annotations

import asyncio
import json
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sessions_app.runtime.loop.executors import in_pool
from sessions_app.runtime.mcp.config import mcp_servers
from sessions_app.runtime.mcp.lane import lane_loop, lane_run, on_lane
from sessions_app.runtime.mcp.names import offered_names
from sessions_app.runtime.mcp.server import McpUnavailable, RemoteTool, ServerConfig
from sessions_app.runtime.mcp.transports import TRANSPORTS
from sessions_app.runtime.tools.base import Tool, ToolAborted, ToolContext, ToolOutput

if TYPE_CHECKING:
    from sessions_app.runtime.mcp.connection import ServerConnection

DESCRIPTION_MAX_CHARS = 1024
SCHEMA_MAX_CHARS = 16_384

_lock = threading.Lock()
_connections: dict[str, ServerConnection] = {}
# (server, tool) -> the definition of a trusted tool this process first saw.
_pins: dict[tuple[str, str], str] = {}


def _connection(config: ServerConfig) -> ServerConnection:
    # The SDK is imported with the first server used, not with the worker (server.py).
    from sessions_app.runtime.mcp.connection import ServerConnection

    with _lock:
        connection = _connections.get(config.name)
        if connection is not None and connection.config == config:
            return connection
        _connections[config.name] = fresh = ServerConnection(config)
    if connection is not None:
        # The server's table changed (a test's file): its old connection (a process) ends.
        asyncio.run_coroutine_threadsafe(connection.close(), lane_loop())
    return fresh


async def mcp_ready() -> None:
    """List the tools of the servers due for it (on the lane), each within its timeout."""
    due = [_connection(config) for config in mcp_servers().values()]
    due = [connection for connection in due if connection.listing_due]
    if due:
        await on_lane(_list_all(due))


async def _list_all(connections: list[ServerConnection]) -> None:
    await asyncio.gather(*(_list_one(connection) for connection in connections))


async def _list_one(connection: ServerConnection) -> None:
    try:
        await connection.listed()
    except McpUnavailable:
        pass  # left out of this turn; the connection keeps the reason for GET /api/tools/


def _trusted(config: ServerConfig, remote: RemoteTool) -> bool:
    """Trusted as the operator named it, for the definition first seen."""
    if remote.name not in config.trusted_tools:
        return False
    with _lock:
        pinned = _pins.setdefault((config.name, remote.name), remote.fingerprint)
    return pinned == remote.fingerprint


def _schema(remote: RemoteTool) -> dict:
    """The tool's arguments as providers take them: a JSON object schema."""
    schema = remote.schema
    if schema.get("type") != "object":
        return {"type": "object", "properties": {}}
    return {"properties": {}, **schema}


def _description(config: ServerConfig, remote: RemoteTool) -> str:
    text = remote.description.strip() or remote.name
    if len(text) > DESCRIPTION_MAX_CHARS:
        text = text[: DESCRIPTION_MAX_CHARS - 1] + "…"
    return f"[MCP server {config.name}] {text}"


@dataclass(frozen=True)
class McpTool:
    """What `GET /api/tools/` and the page know of an offered MCP tool."""

    tool: Tool
    server: str
    remote_name: str


def _offered(config: ServerConfig, tools: dict[str, RemoteTool]) -> list[McpTool]:
    offered = []
    for name, remote_name in offered_names(config.name, list(tools)).items():
        remote = tools[remote_name]
        if len(json.dumps(remote.schema)) > SCHEMA_MAX_CHARS:
            continue  # a schema that would crowd out the conversation is not offered
        tool = Tool(
            name,
            _description(config, remote),
            _schema(remote),
            arun=_runner(config, remote),
            needs_approval=not _trusted(config, remote),
        )
        offered.append(McpTool(tool, config.name, remote_name))
    return offered


def mcp_offered() -> list[McpTool]:
    """Every MCP tool of the listings this process holds, by server in the file's order."""
    offered: list[McpTool] = []
    for config in mcp_servers().values():
        tools = _connection(config).tools
        if tools:
            offered.extend(_offered(config, tools))
    return offered


def mcp_tools() -> dict[str, Tool]:
    """The MCP tools a turn offers now, by offered name (no wait: `mcp_ready` listed them)."""
    return {item.tool.name: item.tool for item in mcp_offered()}


def mcp_servers_status() -> list[dict]:
    """Each configured server: where it is, whether its tools are listed, the last error."""
    status = []
    for config in mcp_servers().values():
        connection = _connection(config)
        status.append(
            {
                "name": config.name,
                "transport": TRANSPORTS[config.transport].describe(config),
                "listed": connection.tools is not None,
                "error": connection.error,
            }
        )
    return status


def _runner(config: ServerConfig, offered_with: RemoteTool):
    async def run(context: ToolContext, arguments: dict) -> ToolOutput:
        return await _call(_connection(config), context, offered_with, arguments)

    return run


async def _call(
    connection: ServerConnection, context: ToolContext, remote: RemoteTool, arguments: dict
) -> ToolOutput:
    """The call on the lane, raced against the turn's Stop: a Stop cancels it at once (the
    SDK then sends the server `notifications/cancelled`). It runs only while the tool is as
    it was when offered (so as trusted or allowed)."""
    call = asyncio.ensure_future(
        on_lane(connection.call(remote.name, arguments, fingerprint=remote.fingerprint))
    )
    stopped = asyncio.ensure_future(context.abort.wait_async(None))
    try:
        await asyncio.wait({call, stopped}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopped.cancel()
        # A Stop — or the turn's own task cancelled — cancels the call on the lane too.
        stopping = not call.done()
        if stopping:
            call.cancel()
    if stopping:
        raise ToolAborted("aborted: the user stopped the turn; the MCP call was cancelled")
    try:
        result = call.result()
    except McpUnavailable as unavailable:
        return ToolOutput(str(unavailable), is_error=True)
    from sessions_app.runtime.mcp.results import result_keep  # with the SDK (server.py)

    text, is_error, files = await in_pool(
        "store",
        result_keep,
        result=result,
        server=connection.config.name,
        tool=remote.name,
        session_id=context.session_id,
        owner_id=context.owner_id,
        fenced=context.fenced,
    )
    return ToolOutput(text, is_error=is_error, files=tuple(files))


def mcp_close_all() -> None:
    """Close every connection of this process (stdio servers end): for tests and shutdown."""
    with _lock:
        connections = list(_connections.values())
        _connections.clear()
        _pins.clear()

    async def close() -> None:
        await asyncio.gather(*(connection.close() for connection in connections))

    if connections:
        lane_run(close(), timeout=30)


def mcp_ready_blocking() -> None:
    """`mcp_ready` for a thread that is not on an event loop (an HTTP view)."""
    configs = list(mcp_servers().values())
    due = [_connection(config) for config in configs]
    due = [connection for connection in due if connection.listing_due]
    if due:
        # Each server gives up within its own timeout; the wait here only bounds them all.
        lane_run(_list_all(due), timeout=max(c.timeout_sec for c in configs) * 2 + 5)
