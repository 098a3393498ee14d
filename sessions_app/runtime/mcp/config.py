"""MCP_SERVERS_FILE: the operator's MCP servers, read once per process (docs/design.md §31).

```toml
[servers.notes]              # tools appear as mcp__notes__<tool>
transport = "stdio"          # or "http" (streamable HTTP) with url = "https://…"
command = "/usr/bin/python3"
args = ["server.py"]
env = { NOTES_DIR = "/srv/notes" }
trusted_tools = ["search"]   # run without asking; every other tool asks first
timeout_sec = 30
```

A file that cannot be read or holds a mistake is ImproperlyConfigured, naming the server and
the key: the process refuses to start rather than offer a half-configured server.
"""

from __future__ import annotations

import re
import tomllib
from functools import cache
from pathlib import Path

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from sessions_app.runtime.mcp.server import DEFAULT_TIMEOUT_SEC, ServerConfig
from sessions_app.runtime.mcp.transports import TRANSPORTS

MAX_TIMEOUT_SEC = 3600.0
# The server's name is the middle of `mcp__<server>__<tool>`: letters, digits and single
# hyphens or underscores, so the name splits back at its double underscores.
SERVER_NAME = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]|_(?!_)){0,31}+")
_KEYS = {"transport", "command", "args", "env", "url", "headers", "trusted_tools", "timeout_sec"}


def _strings(server: str, key: str, value, *, kind: type) -> object:
    if kind is list and isinstance(value, list) and all(isinstance(v, str) for v in value):
        return value
    if kind is dict and isinstance(value, dict) and all(isinstance(v, str) for v in value.values()):
        return value
    shape = "a list of strings" if kind is list else "a table of strings"
    raise ImproperlyConfigured(f"MCP_SERVERS_FILE: servers.{server}.{key} must be {shape}")


def server_config(name: str, table: dict) -> ServerConfig:
    """One `[servers.<name>]` table checked."""
    where = f"MCP_SERVERS_FILE: servers.{name}"
    if not SERVER_NAME.fullmatch(name):
        raise ImproperlyConfigured(
            f"{where}: a server's name is 1-32 letters, digits, '-' or single '_'"
        )
    if not isinstance(table, dict):
        raise ImproperlyConfigured(f"{where} must be a table")
    unknown = sorted(set(table) - _KEYS)
    if unknown:
        raise ImproperlyConfigured(f"{where}: unknown key(s) {', '.join(unknown)}")
    transport = table.get("transport")
    if transport not in TRANSPORTS:
        raise ImproperlyConfigured(
            f"{where}.transport must be one of {', '.join(sorted(TRANSPORTS))}, not {transport!r}"
        )
    timeout = table.get("timeout_sec", DEFAULT_TIMEOUT_SEC)
    if isinstance(timeout, bool) or not isinstance(timeout, int | float):
        raise ImproperlyConfigured(f"{where}.timeout_sec must be a number")
    if not 0 < timeout <= MAX_TIMEOUT_SEC:
        raise ImproperlyConfigured(f"{where}.timeout_sec must be in (0, {MAX_TIMEOUT_SEC:g}]")
    config = ServerConfig(
        name=name,
        transport=transport,
        timeout_sec=float(timeout),
        trusted_tools=frozenset(
            _strings(name, "trusted_tools", table.get("trusted_tools", []), kind=list)
        ),
        command=table.get("command", ""),
        args=tuple(_strings(name, "args", table.get("args", []), kind=list)),
        env=dict(_strings(name, "env", table.get("env", {}), kind=dict)),
        url=table.get("url", ""),
        headers=dict(_strings(name, "headers", table.get("headers", {}), kind=dict)),
    )
    TRANSPORTS[transport].check(config)
    return config


def servers_parse(text: str) -> dict[str, ServerConfig]:
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise ImproperlyConfigured(f"MCP_SERVERS_FILE is not TOML: {error}") from error
    unknown = sorted(set(document) - {"servers"})
    if unknown:
        raise ImproperlyConfigured(f"MCP_SERVERS_FILE: unknown table(s) {', '.join(unknown)}")
    servers = document.get("servers", {})
    if not isinstance(servers, dict):
        raise ImproperlyConfigured("MCP_SERVERS_FILE: servers must be a table of tables")
    return {name: server_config(name, table) for name, table in servers.items()}


@cache
def _servers_of(path: str) -> dict[str, ServerConfig]:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as error:
        raise ImproperlyConfigured(f"MCP_SERVERS_FILE {path!r} cannot be read: {error}") from error
    return servers_parse(text)


def mcp_servers() -> dict[str, ServerConfig]:
    """The configured servers by name (none without MCP_SERVERS_FILE)."""
    path = settings.MCP_SERVERS_FILE
    return _servers_of(path) if path else {}
