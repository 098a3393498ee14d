"""A WebSocket client on a bare TCP socket, for tests that need what a library hides: reading
the server's close frame without answering it, and dropping the connection abruptly (a TCP
reset, as when a laptop's network goes away) instead of closing it."""

from __future__ import annotations

import base64
import os
import socket
import struct
from urllib.parse import urlsplit

from tests.helpers import GUARD_SEC

TEXT, CLOSE = 0x1, 0x8


class RawWebSocket:
    def __init__(self, base: str, path: str, token: str):
        address = urlsplit(base)
        self.sock = socket.create_connection((address.hostname, address.port), timeout=GUARD_SEC)
        key = base64.b64encode(os.urandom(16)).decode()
        request = (
            f"GET {path} HTTP/1.1\r\nHost: {address.netloc}\r\nUpgrade: websocket\r\n"
            f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
            f"Sec-WebSocket-Version: 13\r\nOrigin: {base}\r\n"
            f"Authorization: Token {token}\r\n\r\n"
        )
        self.sock.sendall(request.encode())
        head = b""
        while b"\r\n\r\n" not in head:
            head += self._read(1)
        assert head.startswith(b"HTTP/1.1 101"), head

    def _read(self, count: int) -> bytes:
        data = b""
        while len(data) < count:
            chunk = self.sock.recv(count - len(data))
            if not chunk:
                raise ConnectionError("the server closed the connection")
            data += chunk
        return data

    def send_text(self, text: str) -> None:
        payload = text.encode()
        mask = os.urandom(4)
        if len(payload) < 126:
            header = struct.pack("!BB", 0x80 | TEXT, 0x80 | len(payload))
        elif len(payload) < 2**16:
            header = struct.pack("!BBH", 0x80 | TEXT, 0x80 | 126, len(payload))
        else:
            header = struct.pack("!BBQ", 0x80 | TEXT, 0x80 | 127, len(payload))
        masked = bytes(byte ^ mask[index % 4] for index, byte in enumerate(payload))
        self.sock.sendall(header + mask + masked)

    def receive(self) -> tuple[int, bytes]:
        """The next frame from the server: (opcode, payload)."""
        first, second = self._read(2)
        length = second & 0x7F
        if length == 126:
            (length,) = struct.unpack("!H", self._read(2))
        elif length == 127:
            (length,) = struct.unpack("!Q", self._read(8))
        return first & 0x0F, self._read(length)

    def receive_close_code(self) -> int:
        """Skip frames up to the server's close frame; its code. The close is not answered."""
        while True:
            opcode, payload = self.receive()
            if opcode == CLOSE:
                return struct.unpack("!H", payload[:2])[0]

    def drop(self) -> None:
        """Reset the TCP connection: no close frame, no orderly shutdown."""
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.sock.close()
