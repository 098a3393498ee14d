"""One MCP server's connection, kept by this process on the MCP lane (docs/design.md §31).

Started on first use (a stdio server's process is started then), kept for the next calls,
and made again when it died: before each call the connection is asked for a ping, so a
server killed since the last call is restarted for this one, and a call is never sent into
a connection that is known to be gone. The server's tools are listed once and kept; a
`notifications/tools/list_changed` marks the listing stale and the next use lists them again.

Every wait is bounded — a call, a ping and a listing by the server's `timeout_sec`, its start
by that but at least START_MIN_SEC: a server that does not start, does not answer or cannot
be reached gives `McpUnavailable`, whose text says which, never a hung turn.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

import mcp_types
from mcp import Client
from mcp.shared.exceptions import MCPError

from sessions_app.runtime.mcp.server import (
    DefinitionChanged,
    McpUnavailable,
    RemoteTool,
    ServerConfig,
    fingerprint_of,
)
from sessions_app.runtime.mcp.transports import TRANSPORTS

logger = logging.getLogger(__name__)

# A server whose connection failed is not tried again for a turn's tools before this many
# seconds (a call of one of its tools still tries at once): an unreachable server must not
# add its timeout to every turn.
RETRY_LISTING_SEC = 10.0
# A server's start (a process's interpreter, the handshake) gets at least this long, whatever
# its `timeout_sec` for calls.
START_MIN_SEC = 10.0
CLIENT_INFO = mcp_types.Implementation(name="jarvis-sessions", version="1")
# Connections speak the handshake-era protocol (`mode="legacy"`), which the servers people run
# speak and in which a server pushes `notifications/tools/list_changed`; there, ping is the
# liveness check (the request itself: the SDK's `send_ping` warns it is gone from the newest
# protocol version, which these connections do not speak).
PING = mcp_types.PingRequest(params=mcp_types.RequestParams())


def _remote(server: str, tool: mcp_types.Tool) -> RemoteTool:
    description = tool.description or ""
    schema = tool.input_schema if isinstance(tool.input_schema, dict) else {}
    return RemoteTool(server, tool.name, description, schema, fingerprint_of(description, schema))


class ServerConnection:
    """Lives on the lane: every method runs there."""

    def __init__(self, config: ServerConfig):
        self.config = config
        self.client: Client | None = None
        # The last listing (None before the first), read by any thread: replaced, never edited.
        self.tools: dict[str, RemoteTool] | None = None
        self.stale = True
        self.error = ""
        self.failed_at = 0.0
        self._holder: asyncio.Task | None = None
        self._closing: asyncio.Event | None = None
        self._lock: asyncio.Lock | None = None

    @property
    def listing_due(self) -> bool:
        """Whether a turn's start should (try to) list this server's tools now."""
        if self.tools is not None and not self.stale:
            return False
        return not self.failed_at or time.monotonic() - self.failed_at >= RETRY_LISTING_SEC

    async def listed(self) -> dict[str, RemoteTool]:
        """The server's tools, listed now when stale (connecting first when needed)."""
        async with self._guard():
            await self._connected(check=False)
            if self.stale or self.tools is None:
                await self._list()
            return self.tools

    async def call(
        self, name: str, arguments: dict, *, fingerprint: str
    ) -> mcp_types.CallToolResult:
        """Call the tool as defined by `fingerprint`; McpUnavailable when the server cannot be
        reached or did not answer in time (the SDK tells a server a call it stopped waiting
        for, and one cancelled here), DefinitionChanged when the tool is another now."""
        async with self._guard():
            client = await self._connected(check=True)
            if self.stale:
                await self._list()
            current = self.tools.get(name)
            if current is None or current.fingerprint != fingerprint:
                raise DefinitionChanged(
                    f"not run: MCP server {self.config.name!r} "
                    + (
                        "no longer lists"
                        if current is None
                        else "changed the description or schema of"
                    )
                    + f" the tool {name!r} since it was offered; call it again to be asked "
                    "about the tool as it is now"
                )
        try:
            return await client.call_tool(
                name, arguments, read_timeout_seconds=self.config.timeout_sec
            )
        except MCPError as error:
            if error.code == mcp_types.REQUEST_TIMEOUT:
                raise McpUnavailable(
                    f"MCP server {self.config.name!r} did not answer within "
                    f"{self.config.timeout_sec:g} seconds (timeout_sec); the call was cancelled"
                ) from error
            if error.code == mcp_types.CONNECTION_CLOSED:
                self._forget(client)
                raise McpUnavailable(
                    f"MCP server {self.config.name!r} closed the connection while the call "
                    "ran: its outcome is unknown"
                ) from error
            raise McpUnavailable(f"MCP server {self.config.name!r}: {error}") from error
        except RuntimeError as error:  # the SDK's check of a result against its output schema
            raise McpUnavailable(f"MCP server {self.config.name!r}: {error}") from error

    async def close(self) -> None:
        if self._closing is not None:
            self._closing.set()
        holder, self._holder = self._holder, None
        if holder is not None:
            try:
                await asyncio.wait_for(holder, 10)
            except (TimeoutError, asyncio.CancelledError):
                holder.cancel()
        self.client = None

    # --- inside -----------------------------------------------------------------------
    def _guard(self) -> asyncio.Lock:
        if self._lock is None:
            self._lock = asyncio.Lock()
        return self._lock

    async def _connected(self, *, check: bool) -> Client:
        """The kept client, made (again) when there is none or, with `check`, when it does not
        answer a ping (the server died since its last use)."""
        client = self.client
        if client is not None and check:
            try:
                await asyncio.wait_for(
                    client.session.send_request(PING, mcp_types.EmptyResult),
                    self.config.timeout_sec,
                )
            except (MCPError, TimeoutError, OSError) as error:
                logger.info("MCP server %s: kept connection gone (%s)", self.config.name, error)
                self._forget(client)
                client = None
        if client is None:
            client = await self._start()
        return client

    def _forget(self, client: Client) -> None:
        if self.client is client:
            self.client = None
            self.stale = True
            if self._closing is not None:
                self._closing.set()  # its holder leaves the SDK's context (the process ends)

    async def _start(self) -> Client:
        loop = asyncio.get_running_loop()
        ready: asyncio.Future = loop.create_future()
        self._closing = closing = asyncio.Event()
        self._holder = loop.create_task(self._hold(ready, closing))
        try:
            client = await asyncio.wait_for(asyncio.shield(ready), self._start_sec)
        except TimeoutError:
            closing.set()
            self._failed(f"did not start within {self._start_sec:g} seconds")
            raise McpUnavailable(
                f"MCP server {self.config.name!r} did not start within {self._start_sec:g} seconds"
            ) from None
        except McpUnavailable as error:
            self._failed(str(error))
            raise
        self.client, self.stale, self.error, self.failed_at = client, True, "", 0.0
        return client

    @property
    def _start_sec(self) -> float:
        return max(self.config.timeout_sec, START_MIN_SEC)

    def _failed(self, error: str) -> None:
        self.error, self.failed_at = error, time.monotonic()

    async def _hold(self, ready: asyncio.Future, closing: asyncio.Event) -> None:
        """The connection's own task: enters the SDK's client, hands it over, and leaves it
        (in this same task, as the SDK requires) once closing is set."""
        name = self.config.name
        try:
            target = await TRANSPORTS[self.config.transport].target(self.config)
            async with Client(
                target,
                mode="legacy",
                message_handler=self._heard,
                client_info=CLIENT_INFO,
                read_timeout_seconds=self._start_sec,
            ) as client:
                if not ready.done():
                    ready.set_result(client)
                await closing.wait()
        except asyncio.CancelledError:
            raise
        except BaseException as error:  # noqa: BLE001 - any failure to connect is the caller's
            text = _reason(error)
            logger.info("MCP server %s: connection failed or ended: %s", name, text)
            if not ready.done():
                ready.set_exception(
                    McpUnavailable(f"MCP server {name!r} cannot be reached: {text}")
                )

    async def _heard(self, message: Any) -> None:
        if isinstance(message, mcp_types.ToolListChangedNotification):
            self.stale = True

    async def _list(self) -> None:
        client = self.client
        tools: dict[str, RemoteTool] = {}
        cursor = None
        try:
            for _page in range(100):  # a server that pages for ever cannot hang a turn
                page = await asyncio.wait_for(
                    client.list_tools(cursor=cursor, cache_mode="refresh"),
                    self.config.timeout_sec,
                )
                for tool in page.tools:
                    tools[tool.name] = _remote(self.config.name, tool)
                cursor = page.next_cursor
                if cursor is None:
                    break
        except (MCPError, TimeoutError, OSError) as error:
            self._forget(client)
            self._failed(_reason(error))
            raise McpUnavailable(
                f"MCP server {self.config.name!r} did not list its tools: {_reason(error)}"
            ) from error
        self.tools, self.stale = tools, False


def _reason(error: BaseException) -> str:
    """The first error of a group (the SDK's task groups wrap them), as a sentence."""
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    if isinstance(error, TimeoutError):
        return "timed out"
    return str(error) or type(error).__name__
