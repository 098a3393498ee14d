"""A server of MCP_SERVERS_FILE, as the rest of the room uses it (read by `config`)."""

from __future__ import annotations

from dataclasses import dataclass, field

DEFAULT_TIMEOUT_SEC = 30.0


@dataclass(frozen=True)
class ServerConfig:
    name: str
    transport: str
    timeout_sec: float = DEFAULT_TIMEOUT_SEC
    trusted_tools: frozenset[str] = frozenset()
    command: str = ""
    args: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict, hash=False)
    url: str = ""
    headers: dict[str, str] = field(default_factory=dict, hash=False)
