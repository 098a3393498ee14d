"""A turn's end written to its sockets now, not at the server's next pass (docs/design.md §26).

Daphne hands a frame to its Twisted transport, which holds it until the reactor next finds
the socket writable: the event loop's next pass, 0.1–0.5 s away under a storm of turns. Most
frames can wait for it (several leave in one write). A turn's `agent_end` should not: a Stop
and a short answer are judged by when it arrives.

`WriteNow`, the outermost middleware of the WebSocket routes, puts in the scope a function
(`scope[WRITE_NOW]`) that writes what the socket's transport holds. Without Daphne's TCP
transport (TLS, another server, a test's communicator) it does nothing.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

WRITE_NOW = "jarvis.write_now"


def _nothing() -> None:
    pass


def write_now_for(send: Callable) -> Callable[[], None]:
    """Daphne's `send` is `partial(server.handle_reply, protocol)`: the function that writes
    what the protocol's transport holds, or one that does nothing."""
    protocol = send.args[0] if isinstance(send, functools.partial) and send.args else None
    transport = getattr(protocol, "transport", None)
    do_write = getattr(transport, "doWrite", None)
    if do_write is None:
        return _nothing

    def write_now() -> None:
        # What the reactor does when it finds the socket writable; a write that fails is
        # left to the reactor, which meets the same failure at its next pass and closes.
        if getattr(transport, "connected", False) and not getattr(transport, "disconnecting", True):
            do_write()

    return write_now


class WriteNow:
    """ASGI middleware: `scope[WRITE_NOW]` for the consumer (see the module)."""

    def __init__(self, application):
        self.application = application

    async def __call__(self, scope, receive, send):
        return await self.application({**scope, WRITE_NOW: write_now_for(send)}, receive, send)
