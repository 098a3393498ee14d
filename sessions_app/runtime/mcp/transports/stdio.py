"""Stdio servers: a process this worker starts on first use and keeps (docs/design.md §31).

The server gets the worker's PATH, HOME and locale plus the table's `env`, nothing else of the
worker's environment (its database URL, its keys): the SDK's default set of inherited
variables. The process dies with the connection (the SDK closes its stdin, then terminates
its process tree).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from django.core.exceptions import ImproperlyConfigured

from sessions_app.runtime.mcp.transports.base import McpTransport

if TYPE_CHECKING:
    from sessions_app.runtime.mcp.server import ServerConfig


class StdioTransport(McpTransport):
    def check(self, config: ServerConfig) -> None:
        if not isinstance(config.command, str) or not config.command:
            raise ImproperlyConfigured(
                f"MCP_SERVERS_FILE: servers.{config.name}.command is required for stdio"
            )
        if config.url or config.headers:
            raise ImproperlyConfigured(
                f"MCP_SERVERS_FILE: servers.{config.name}: url and headers are for http servers"
            )

    async def target(self, config: ServerConfig):
        # The SDK is imported with the first server used, not with the worker (server.py).
        from mcp import StdioServerParameters
        from mcp.client.stdio import get_default_environment

        command = config.command
        if os.sep in command and not os.access(command, os.X_OK):
            raise ConnectionRefusedError(f"{command} is not an executable file")
        return StdioServerParameters(
            command=command,
            args=list(config.args),
            env={**get_default_environment(), **config.env},
        )

    def describe(self, config: ServerConfig) -> str:
        return f"stdio: {os.path.basename(config.command)}"
