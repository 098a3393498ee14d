"""A turn's end written to its sockets now, not at the server's next pass (docs/design.md §26).

Daphne hands a frame to its Twisted transport, which holds it until the reactor next finds
the socket writable: the event loop's next pass, 0.1–0.5 s away under a storm of turns. Most
frames can wait for it (several leave in one write). A turn's `agent_end` should not: a Stop
and a short answer are judged by when it arrives.

`WriteNow`, the outermost middleware of the WebSocket routes, puts in the scope a function
(`scope[WRITE_NOW]`) that writes what the socket's transport holds. Without Daphne's TCP
transport (TLS, another server, a test's communicator) it does nothing.

It also puts there `scope[SEND_TEXT_NOW]`: a turn's event frame handed to the socket's
WebSocket protocol directly. A frame goes that way to every tab of a session, a dozen per
turn each; through Channels' `send` it went through five coroutines (the consumer's, the
session middleware's, Daphne's `handle_reply`) that end in the same call
(docs/performance.md). It declines (False) a socket that is not open, which then takes the
usual way and its handling of a closing socket; a write that raises (a frame over the
server's message limit: autobahn refuses it) takes the usual way too, which meets the same
failure and ends the socket's consumer. None without Daphne's protocol.

On Daphne's plain TCP transport such a frame is written to the socket in the call itself
(`_FrameWriter`): the frame's bytes as autobahn builds them for a server, one `send`. The
usual way cost autobahn's framing (its checks and counters, a debug line's arguments
formatted whether logged or not), then the reactor's watch for the socket to become
writable and the write at its next pass: the loop's selector changed twice per frame, and
a socket with a frame waiting made every pass longer (docs/performance.md). What the socket
does not take at once, and any frame while the transport holds bytes, is handed to the
transport, which keeps the order and meets a failed connection as it always does.
"""

from __future__ import annotations

import functools
import struct
from collections.abc import Callable

from twisted.internet import tcp

WRITE_NOW = "jarvis.write_now"
SEND_TEXT_NOW = "jarvis.send_text_now"


def _nothing() -> None:
    pass


def daphne_protocol(send: Callable):
    """Daphne's `send` is `partial(server.handle_reply, protocol)`: the protocol, else None."""
    return send.args[0] if isinstance(send, functools.partial) and send.args else None


def write_now_for(send: Callable) -> Callable[[], None]:
    """The function that writes what the protocol's transport holds, or one that does
    nothing."""
    protocol = daphne_protocol(send)
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


def send_text_now_for(send: Callable) -> Callable[[str], bool] | None:
    """A text frame handed to Daphne's WebSocket protocol, as its `handle_reply` does with a
    `websocket.send`; False, and nothing sent, when the socket is not open."""
    protocol = daphne_protocol(send)
    send_message = getattr(protocol, "sendMessage", None)
    open_state = getattr(protocol, "STATE_OPEN", None)
    if send_message is None or open_state is None:
        return None

    writer = _FrameWriter.for_protocol(protocol)

    def send_text_now(text: str) -> bool:
        if protocol.state != open_state:
            return False
        payload = text.encode("utf8")
        if writer is None or not writer.send(payload):
            send_message(payload, False)
        return True

    return send_text_now


def text_frame(payload: bytes) -> bytes:
    """A whole text message in one unmasked frame, as a server sends it (RFC 6455 §5.2)."""
    length = len(payload)
    if length <= 125:
        return bytes((0x81, length)) + payload
    if length <= 0xFFFF:
        return struct.pack("!BBH", 0x81, 126, length) + payload
    return struct.pack("!BBQ", 0x81, 127, length) + payload


class _FrameWriter:
    """A text frame written to the socket of a Daphne connection by the caller (see the
    module). `send` answers False when autobahn must send it: a message over its limit (it
    refuses it), its own queue or logs, fragments, compression."""

    def __init__(self, protocol, transport: tcp.Server):
        self.protocol = protocol
        self.transport = transport

    @classmethod
    def for_protocol(cls, protocol) -> _FrameWriter | None:
        """None unless the protocol is autobahn's, as a server, over plain TCP."""
        transport = getattr(protocol, "transport", None)
        factory = getattr(protocol, "factory", None)
        if not isinstance(transport, tcp.Server) or factory is None:
            return None  # TLS, another server, a test's transport: autobahn's way
        if not getattr(factory, "isServer", False) or getattr(protocol, "maskServerFrames", True):
            return None
        return cls(protocol, transport)

    def send(self, payload: bytes) -> bool:
        protocol, transport = self.protocol, self.transport
        if (
            0 < protocol.maxMessagePayloadSize < len(payload)
            or protocol.autoFragmentSize
            or protocol.send_queue
            or protocol.logFrames
            or protocol.logOctets
            or protocol._perMessageCompress is not None
            or not transport.connected
            or transport.disconnecting
        ):
            return False
        frame = text_frame(payload)
        if transport._tempDataLen or transport.offset < len(transport.dataBuffer):
            transport.write(frame)  # behind what waits: the transport keeps the order
            return True
        try:
            sent = transport.socket.send(frame)
        except OSError:
            sent = 0  # full, or failed: the transport's write meets it, as it always does
        if sent < len(frame):
            transport.write(frame[sent:])
        return True


class WriteNow:
    """ASGI middleware: `scope[WRITE_NOW]` and `scope[SEND_TEXT_NOW]` for the consumer (see
    the module)."""

    def __init__(self, application):
        self.application = application

    async def __call__(self, scope, receive, send):
        writers = {WRITE_NOW: write_now_for(send), SEND_TEXT_NOW: send_text_now_for(send)}
        return await self.application({**scope, **writers}, receive, send)
