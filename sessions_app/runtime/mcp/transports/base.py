"""What every MCP transport answers (docs/design.md §31; one module per transport)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sessions_app.runtime.mcp.server import ServerConfig


class McpTransport(ABC):
    """How this process reaches one kind of server."""

    @abstractmethod
    def check(self, config: ServerConfig) -> None:
        """Refuse (ImproperlyConfigured) a server table this transport cannot use."""

    @abstractmethod
    async def target(self, config: ServerConfig) -> Any:
        """What `mcp.Client` connects to, made now (on the MCP lane): a stdio server's
        parameters, or a transport whose every request goes where §27 allows. Raises
        ConnectionRefusedError with a sentence the model and the person can read when the
        server may not be reached."""

    def describe(self, config: ServerConfig) -> str:
        """Where the server is, for `GET /api/tools/` and error results (no secrets)."""
        return config.transport
