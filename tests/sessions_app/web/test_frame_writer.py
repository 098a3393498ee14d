"""A turn's frame is written to its socket in the call that sends it (docs/design.md §26), on
Daphne's plain TCP transport: the bytes autobahn would write, in the order they were sent,
whatever the socket takes at once and whatever the transport still holds."""

import socket

import pytest
from autobahn.twisted.websocket import WebSocketServerFactory, WebSocketServerProtocol
from twisted.internet import tcp

from sessions_app.runtime.loop.socket_writes import _FrameWriter, text_frame


class Reactor:
    """What a Twisted transport asks of its reactor, noted instead of done."""

    def __init__(self):
        self.writers = set()

    def addWriter(self, writer):  # noqa: N802 - Twisted's names
        self.writers.add(writer)

    def removeWriter(self, writer):  # noqa: N802
        self.writers.discard(writer)

    def addReader(self, reader):  # noqa: N802
        pass

    def removeReader(self, reader):  # noqa: N802
        pass


class Captured:
    """A transport that keeps what autobahn writes (the reference bytes)."""

    connected, disconnecting = True, False

    def __init__(self):
        self.data = b""

    def write(self, data: bytes) -> None:
        self.data += data


def open_protocol(transport) -> WebSocketServerProtocol:
    """Autobahn's server protocol, open, as Daphne's is once a socket is accepted."""
    protocol = WebSocketServerProtocol()
    protocol.factory = WebSocketServerFactory()
    protocol.transport = transport
    protocol._connectionMade()
    protocol.state = protocol.STATE_OPEN
    return protocol


@pytest.fixture
def connection():
    """A Daphne-like connection over a real socket pair: (protocol, transport, reactor, peer)."""
    server_side, peer = socket.socketpair()
    reactor = Reactor()
    protocol = WebSocketServerProtocol()
    transport = tcp.Server(server_side, protocol, ("127.0.0.1", 1), None, 1, reactor)
    protocol = open_protocol(transport)
    transport.protocol = protocol
    yield protocol, transport, reactor, peer
    peer.close()
    server_side.close()


def autobahns_bytes(payload: bytes) -> bytes:
    captured = Captured()
    open_protocol(captured).sendMessage(payload, False)
    return captured.data


def read_exactly(peer: socket.socket, size: int) -> bytes:
    data = b""
    peer.settimeout(5)
    while len(data) < size:
        data += peer.recv(size - len(data))
    return data


@pytest.mark.parametrize("size", [0, 5, 125, 126, 65535, 65536, 200_000])
def test_a_frame_is_the_bytes_autobahn_writes(size):
    payload = ("é" * size).encode()[:size]
    assert text_frame(payload) == autobahns_bytes(payload)


def test_a_frame_is_in_the_socket_when_the_call_returns(connection):
    protocol, transport, reactor, peer = connection
    writer = _FrameWriter.for_protocol(protocol)
    assert writer.send(b'{"type":"delta"}') is True
    expected = text_frame(b'{"type":"delta"}')
    assert read_exactly(peer, len(expected)) == expected
    assert reactor.writers == set()  # the reactor was never asked to watch the socket


def test_a_frame_goes_behind_what_the_transport_holds(connection):
    protocol, transport, reactor, peer = connection
    writer = _FrameWriter.for_protocol(protocol)
    protocol.sendMessage(b"sent the usual way", False)  # held until the reactor's write
    assert writer.send(b"sent now") is True
    assert reactor.writers == {transport}
    transport.doWrite()
    expected = text_frame(b"sent the usual way") + text_frame(b"sent now")
    assert read_exactly(peer, len(expected)) == expected


def test_what_the_socket_does_not_take_is_written_later_in_order(connection):
    protocol, transport, reactor, peer = connection
    transport.socket.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    writer = _FrameWriter.for_protocol(protocol)
    frames = [bytes([65 + index]) * 300_000 for index in range(3)]
    for frame in frames:
        assert writer.send(frame) is True
    assert reactor.writers == {transport}  # the socket was full: the rest waits
    expected = b"".join(text_frame(frame) for frame in frames)
    received = b""
    peer.setblocking(False)
    for _ in range(10_000):
        if len(received) == len(expected):
            break
        try:
            received += peer.recv(1 << 20)
        except BlockingIOError:
            transport.doWrite()  # what the reactor does once the socket is writable
    assert received == expected
    assert reactor.writers == set()


def test_autobahn_sends_what_it_must_handle_itself(connection):
    protocol, transport, reactor, peer = connection
    writer = _FrameWriter.for_protocol(protocol)
    protocol.maxMessagePayloadSize = 10
    assert writer.send(b"longer than ten") is False  # autobahn refuses it, as before
    protocol.maxMessagePayloadSize = 0
    protocol.autoFragmentSize = 4
    assert writer.send(b"in pieces") is False
    protocol.autoFragmentSize = 0
    protocol._perMessageCompress = object()
    assert writer.send(b"compressed") is False
    protocol._perMessageCompress = None
    transport.disconnecting = True
    assert writer.send(b"closing") is False
    peer.setblocking(False)
    with pytest.raises(BlockingIOError):
        peer.recv(1)  # none of them was written


def test_only_a_servers_protocol_over_plain_tcp_gets_a_writer(connection):
    protocol, transport, reactor, peer = connection
    assert _FrameWriter.for_protocol(open_protocol(Captured())) is None
    protocol.maskServerFrames = True
    assert _FrameWriter.for_protocol(protocol) is None
