"""Running the fake MCP server (tests/fakes/mcp_server.py) for a test, and the
MCP_SERVERS_FILE that names it: over stdio (the product starts it) or over streamable HTTP
(started here on a free loopback port)."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from tests.helpers import GUARD_SEC, REPO
from tests.parallel import free_ports

SERVER_SCRIPT = REPO / "tests" / "fakes" / "mcp_server.py"


def toml_table(name: str, values: dict) -> str:
    lines = [f"[servers.{name}]"]
    for key, value in values.items():
        if isinstance(value, dict):
            inner = ", ".join(f"{k} = {_toml(v)}" for k, v in value.items())
            lines.append(f"{key} = {{ {inner} }}")
        else:
            lines.append(f"{key} = {_toml(value)}")
    return "\n".join(lines) + "\n"


def _toml(value) -> str:
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, list):
        return "[" + ", ".join(_toml(item) for item in value) + "]"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def stdio_table(directory: Path, **values) -> dict:
    """A stdio server table for the fake, leaving its traces in `directory`."""
    return {
        "transport": "stdio",
        "command": sys.executable,
        "args": [str(SERVER_SCRIPT), "stdio"],
        "env": {"FAKE_MCP_DIR": str(directory), **values.pop("env", {})},
        **values,
    }


def http_table(url: str, **values) -> dict:
    return {"transport": "http", "url": url, **values}


def servers_file(path: Path, **servers: dict) -> Path:
    path.write_text("".join(toml_table(name, table) for name, table in servers.items()))
    return path


def http_env(port: int) -> dict:
    """The outbound settings under which the product may reach a loopback server (§27)."""
    return {"OUTBOUND_ALLOW_HTTP": "true", "OUTBOUND_URL_ALLOWLIST": f"127.0.0.1:{port}"}


class HttpServer:
    def __init__(self, directory: Path, port: int | None = None, **env: str):
        self.directory = directory
        self.port = port or free_ports(1)
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self.env = env
        self.process: subprocess.Popen | None = None

    def start(self) -> HttpServer:
        self.process = subprocess.Popen(
            [sys.executable, str(SERVER_SCRIPT), "http", str(self.port)],
            env={**_base_env(), "FAKE_MCP_DIR": str(self.directory), **self.env},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + GUARD_SEC
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return self
            except OSError:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("the fake MCP server did not start") from None
                time.sleep(0.05)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(GUARD_SEC)


def _base_env() -> dict:
    return {key: os.environ[key] for key in ("PATH", "HOME") if key in os.environ}


@contextlib.contextmanager
def http_server(directory: Path, **env: str) -> Iterator[HttpServer]:
    server = HttpServer(directory, **env).start()
    try:
        yield server
    finally:
        server.stop()
