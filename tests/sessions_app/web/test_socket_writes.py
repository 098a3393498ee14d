"""A turn's end leaves the server as it is sent, not at the reactor's next pass (docs/design.md
§26): under a storm that pass is 0.1–0.5 s away, and a Stop is judged by `agent_end`."""

import functools

import pytest

from sessions_app.core import frames
from sessions_app.runtime.live.live import LiveSocket
from sessions_app.runtime.loop.socket_writes import (
    WRITE_NOW,
    WriteNow,
    send_text_now_for,
    write_now_for,
)

pytestmark = pytest.mark.anyio


class HeldTransport:
    """What Twisted's TCP transport does with a frame: it holds it until `doWrite`."""

    def __init__(self):
        self.connected = True
        self.disconnecting = False
        self.held: list[bytes] = []
        self.written: list[bytes] = []

    def write(self, data: bytes) -> None:
        self.held.append(data)

    def doWrite(self) -> None:  # noqa: N802 - Twisted's name
        self.written.extend(self.held)
        self.held.clear()


class Protocol:
    def __init__(self):
        self.transport = HeldTransport()


def daphne_send(protocol: Protocol):
    async def handle_reply(protocol, message):
        protocol.transport.write(message["text"].encode())

    return functools.partial(handle_reply, protocol)


async def test_a_turns_end_is_written_at_once_and_its_pieces_wait_for_the_reactor():
    protocol = Protocol()
    send = daphne_send(protocol)

    async def send_text(text: str) -> None:
        await send({"type": "websocket.send", "text": text})

    socket = LiveSocket("s1", send_text, write_now_for(send))
    await socket.go_live(None)
    delta = frames.frame_text({"type": "delta", "text": "hello", "event_seq": 1})
    end = frames.frame_text({"type": "agent_end", "status": "aborted", "event_seq": 2})
    await socket.deliver("t1", 1, delta)
    assert protocol.transport.written == []  # a piece leaves with the reactor's next write
    await socket.deliver("t1", 2, end)
    assert protocol.transport.written == [delta.encode(), end.encode()]
    assert protocol.transport.held == []


async def test_a_closing_socket_is_left_to_the_reactor():
    protocol = Protocol()
    protocol.transport.disconnecting = True
    write_now = write_now_for(daphne_send(protocol))
    protocol.transport.write(b"last words")
    write_now()
    assert protocol.transport.written == []


def test_without_daphnes_transport_it_does_nothing():
    async def other_server_send(message):
        pass

    write_now_for(other_server_send)()  # no error, nothing to write
    no_transport = functools.partial(other_server_send)
    write_now_for(no_transport)()


async def test_the_middleware_gives_the_route_the_sockets_writer():
    protocol = Protocol()
    seen = {}

    async def route(scope, receive, send):
        seen.update(scope)

    await WriteNow(route)({"type": "websocket", "path": "/"}, None, daphne_send(protocol))
    protocol.transport.write(b"frame")
    seen[WRITE_NOW]()
    assert protocol.transport.written == [b"frame"]


def test_every_agent_end_frame_is_told_from_its_text():
    for event in (
        {"type": "agent_end", "turn_id": "t", "status": "completed", "last_seq": 4, "event_seq": 9},
        {"type": "agent_end", "status": "aborted"},
    ):
        assert frames.is_turn_end(frames.frame_text(event))
    for other in ({"type": "agent_start", "turn_id": "t"}, {"type": "delta", "text": "agent_end"}):
        assert not frames.is_turn_end(frames.frame_text(other))


class WebSocketProtocol(Protocol):
    """Daphne's protocol as far as a frame goes: autobahn's `sendMessage` and its state."""

    STATE_OPEN, STATE_CLOSING = 1, 2

    def __init__(self):
        super().__init__()
        self.state = self.STATE_OPEN

    def sendMessage(self, payload: bytes, isBinary: bool) -> None:  # noqa: N802, N803 - autobahn's
        assert not isBinary
        self.transport.write(payload)


async def test_a_turns_frames_go_to_an_open_socket_without_channels_layers():
    protocol = WebSocketProtocol()
    through_channels: list[str] = []

    async def send_text(text: str) -> None:
        through_channels.append(text)

    send = daphne_send(protocol)
    socket = LiveSocket("s1", send_text, write_now_for(send), send_text_now_for(send))
    await socket.go_live(None)
    delta = frames.frame_text({"type": "delta", "text": "héllo", "event_seq": 1})
    await socket.deliver("t1", 1, delta)
    assert protocol.transport.held == [delta.encode("utf8")] and through_channels == []

    # A closing socket takes the usual way, which knows what to do with it.
    protocol.state = protocol.STATE_CLOSING
    end = frames.frame_text({"type": "agent_end", "status": "completed", "event_seq": 2})
    await socket.deliver("t1", 2, end)
    assert through_channels == [end]
    assert protocol.transport.written + protocol.transport.held == [delta.encode("utf8")]


def test_without_daphnes_protocol_there_is_no_direct_way():
    async def other_server_send(message):
        pass

    assert send_text_now_for(other_server_send) is None
    assert send_text_now_for(daphne_send(Protocol())) is None  # no WebSocket protocol


async def test_a_direct_write_that_fails_takes_the_usual_way():
    # A socket cut between the state's check and the write: the usual way meets the same
    # failure, and its handling ends the socket's consumer (the frame is not lost silently).
    through_channels: list[str] = []

    async def send_text(text: str) -> None:
        through_channels.append(text)

    def cut(text: str) -> bool:
        raise ConnectionError("the transport is gone")

    socket = LiveSocket("s1", send_text, None, cut)
    await socket.go_live(None)
    delta = frames.frame_text({"type": "delta", "text": "x", "event_seq": 1})
    await socket.deliver("t1", 1, delta)
    assert through_channels == [delta]
