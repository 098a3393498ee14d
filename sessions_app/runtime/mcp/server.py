"""A server of MCP_SERVERS_FILE as the rest of the room uses it (read by `config`), what it
lists, and why it cannot be used now.

Nothing here imports the MCP SDK: a worker with no server configured never loads it (about
half of a worker's start-up time), and the room's modules that do (`connection`, `results`,
the transports' connecting code) are imported only once a server is used."""

from __future__ import annotations

import hashlib
import json
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


class McpUnavailable(Exception):
    """The server cannot be used now; the text says why (the model and the person read it)."""


class DefinitionChanged(McpUnavailable):
    """The tool is not the one that was trusted or allowed: the call is not sent."""


@dataclass(frozen=True)
class RemoteTool:
    """A tool as its server lists it."""

    server: str
    name: str
    description: str
    schema: dict
    # What a trust or an approval was given to: a changed description or schema is a new tool.
    fingerprint: str


def fingerprint_of(description: str, schema: dict) -> str:
    text = json.dumps([description, schema], sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()
