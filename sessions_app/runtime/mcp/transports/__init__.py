"""How this process reaches an MCP server: one class per transport, picked by a server's
`transport` from this registry (docs/design.md §31)."""

from sessions_app.runtime.mcp.transports.base import McpTransport
from sessions_app.runtime.mcp.transports.http import HttpTransport
from sessions_app.runtime.mcp.transports.stdio import StdioTransport

TRANSPORTS: dict[str, McpTransport] = {"stdio": StdioTransport(), "http": HttpTransport()}
