"""Streamable-HTTP servers, under the outbound rules of docs/design.md §27.

The URL is the operator's (like NOTIFY_WEBHOOK_URL: no host list to pass), parsed once by
the shared checker: `https://` only unless OUTBOUND_ALLOW_HTTP, no user name or password in
it. At each connection the host is resolved once and every address checked against private
ranges (unless the host is on OUTBOUND_URL_ALLOWLIST with its port), and every request of
that connection goes to the checked address — with the URL's own name as Host and for TLS —
so a later DNS answer cannot point the connection into the server's own network.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

import anyio.to_thread
import httpx2
from django.core.exceptions import ImproperlyConfigured

from jarvis_site.shared.outbound_urls import (
    OutboundTarget,
    OutboundUrlRefused,
    outbound_address,
    outbound_target,
)
from sessions_app.runtime.mcp.transports.base import McpTransport

if TYPE_CHECKING:
    from sessions_app.runtime.mcp.server import ServerConfig


class _Pinned(httpx2.AsyncBaseTransport):
    """Every request to the checked address, named as the URL names its host."""

    def __init__(self, target: OutboundTarget, address: str):
        self.target = target
        self.address = address
        self.inner = httpx2.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        if request.url.host != self.target.host or (request.url.port or 0) not in {
            0,
            self.target.port,
        }:
            raise httpx2.ConnectError(f"refused: a request of this server left {self.target.host}")
        request.url = request.url.copy_with(host=self.address)
        request.headers["Host"] = self.target.url.netloc.decode("ascii")
        request.extensions = {**request.extensions, "sni_hostname": self.target.host}
        return await self.inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self.inner.aclose()


@asynccontextmanager
async def _connected(target: OutboundTarget, address: str, config: ServerConfig) -> AsyncIterator:
    """The SDK's streamable-HTTP streams over a client pinned to `address` (closed after)."""
    # The SDK is imported with the first server used, not with the worker (server.py).
    from mcp.client.streamable_http import streamable_http_client

    # The SDK's own timeouts for MCP over HTTP: a response stream may stay open for minutes;
    # a call's own limit is the server's timeout_sec, kept by the connection.
    timeout = httpx2.Timeout(30.0, read=300.0)
    async with (
        httpx2.AsyncClient(
            headers=dict(config.headers), timeout=timeout, transport=_Pinned(target, address)
        ) as client,
        streamable_http_client(str(target.url), http_client=client) as streams,
    ):
        yield streams


class HttpTransport(McpTransport):
    def check(self, config: ServerConfig) -> None:
        if config.command or config.args or config.env:
            raise ImproperlyConfigured(
                f"MCP_SERVERS_FILE: servers.{config.name}: command, args and env are for stdio"
            )
        try:
            outbound_target(config.url, allowlisted=False)
        except OutboundUrlRefused as refused:
            raise ImproperlyConfigured(
                f"MCP_SERVERS_FILE: servers.{config.name}.url: {refused}"
            ) from refused

    async def target(self, config: ServerConfig):
        target = outbound_target(config.url, allowlisted=False)
        try:
            address = await anyio.to_thread.run_sync(outbound_address, target)
        except OutboundUrlRefused as refused:
            raise ConnectionRefusedError(str(refused)) from refused
        except OSError as error:
            raise ConnectionRefusedError(f"{target.host} does not resolve: {error}") from error
        return _connected(target, address, config)

    def describe(self, config: ServerConfig) -> str:
        target = outbound_target(config.url, allowlisted=False)
        return f"http: {target.host}:{target.port}"
