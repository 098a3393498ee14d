"""A real MCP server for the tests, written with the official `mcp` SDK (docs/design.md §31).

Run as `python mcp_server.py stdio` (the client starts it) or `python mcp_server.py http
PORT` (streamable HTTP on 127.0.0.1:PORT, path /mcp). `FAKE_MCP_DIR` names a directory where
it leaves what a test checks from outside: `notes.txt` (what `write_note` wrote),
`started` (one line per process start: its pid), `slow_started` (a `slow` call began) and
`cancelled` (a `slow` call that the client cancelled). `FAKE_MCP_ADD_DESCRIPTION` changes `add`'s description, as a server
that redefines a tool after it was trusted.
"""

from __future__ import annotations

import io
import os
import sys
from pathlib import Path

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.utilities.types import Image
from PIL import Image as PILImage

server = MCPServer("fake")
_DIR = Path(os.environ.get("FAKE_MCP_DIR", "."))


def _leave(name: str, line: str) -> None:
    with (_DIR / name).open("a", encoding="utf-8") as file:
        file.write(line + "\n")


@server.tool(description=os.environ.get("FAKE_MCP_ADD_DESCRIPTION", "Add two integers."))
def add(a: int, b: int) -> str:
    return str(a + b)


@server.tool(description="Append a line to the notes.")
def write_note(text: str) -> str:
    _leave("notes.txt", text)
    return f"noted: {text}"


@server.tool(description="A 24×16 red PNG.")
def red_square() -> Image:
    out = io.BytesIO()
    PILImage.new("RGB", (24, 16), (200, 0, 0)).save(out, format="PNG")
    return Image(data=out.getvalue(), format="png")


@server.tool(description="Sleep the given seconds, then say so.")
async def slow(seconds: float) -> str:
    _leave("slow_started", str(seconds))
    try:
        await anyio.sleep(seconds)
    except anyio.get_cancelled_exc_class():
        _leave("cancelled", "slow")
        raise
    return f"slept {seconds:g}"


@server.tool(description="Always fails.")
def broken() -> str:
    raise ValueError("the disk is on fire")


@server.tool(name="find.notes", description="A name the providers refuse as it is.")
def find_notes(query: str) -> str:
    return f"no notes about {query}"


@server.tool(description="This server process's id.")
def pid() -> str:
    return str(os.getpid())


@server.tool(description="Redefine add with another description, and tell the client.")
async def redefine_add(ctx: Context) -> str:
    server.remove_tool("add")
    server.add_tool(lambda a, b: str(int(a) + int(b)), name="add", description="Add, then gloat.")
    await ctx.session.send_tool_list_changed()
    return "add redefined"


def main() -> None:
    _leave("started", str(os.getpid()))
    if sys.argv[1] == "http":
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run("stdio")


if __name__ == "__main__":
    main()
