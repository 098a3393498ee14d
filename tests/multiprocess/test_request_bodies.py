"""Request bodies that reach the API through a real Daphne, sent byte by byte on a socket:
what a client gets for a chunked body, for a multipart body Daphne's HTTP server cannot
parse, and for a body over its path's cap, which `manage.py serve` refuses before reading it
(README, "Request bodies"; docs/design.md §27)."""

import contextlib
import json
import select
import socket
from collections.abc import Iterator

import pytest

from sessions_app.store import get_store
from tests.builders import token_of
from tests.helpers import GUARD_SEC
from tests.multiprocess.servers import daphne

pytestmark = pytest.mark.django_db(transaction=True)


def exchange(base: str, request: bytes) -> tuple[int, dict[str, str], bytes]:
    """Send raw bytes; read the whole answer (`Connection: close`: the server closes after it)."""
    host, port = base.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=GUARD_SEC) as sock:
        sock.sendall(request)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    status_line, *header_lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in header_lines:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    if headers.get("transfer-encoding") == "chunked":
        body = dechunked(body)
    return int(status_line.split()[1]), headers, body


def dechunked(body: bytes) -> bytes:
    whole = b""
    while True:
        size, _, body = body.partition(b"\r\n")
        if int(size, 16) == 0:
            return whole
        whole, body = whole + body[: int(size, 16)], body[int(size, 16) + 2 :]


def raw_request(method: str, path: str, token: str, headers: dict[str, str], body: bytes) -> bytes:
    lines = [f"{method} {path} HTTP/1.1", "Host: 127.0.0.1", f"Authorization: Token {token}"]
    lines += [f"{name}: {value}" for name, value in headers.items()]
    lines.append("Connection: close")
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


def chunked(body: bytes) -> bytes:
    return f"{len(body):x}\r\n".encode() + body + b"\r\n0\r\n\r\n"


def test_a_chunked_body_is_refused_with_json_and_creates_nothing(alice):
    token = token_of(alice)
    with daphne() as base:
        status, headers, body = exchange(
            base,
            raw_request(
                "POST",
                "/api/sessions/",
                token,
                {"Content-Type": "application/json", "Transfer-Encoding": "chunked"},
                chunked(b'{"id": "sent-chunked"}'),
            ),
        )
        assert status == 411
        assert headers["content-type"].startswith("application/json")
        assert json.loads(body)["code"] == "length_required"
        # The same body with its length is taken as it was meant.
        payload = b'{"id": "sent-whole"}'
        status, _, body = exchange(
            base,
            raw_request(
                "POST",
                "/api/sessions/",
                token,
                {"Content-Type": "application/json", "Content-Length": str(len(payload))},
                payload,
            ),
        )
        assert status == 201 and json.loads(body)["id"] == "sent-whole"
    assert [meta.id for meta in get_store().list(owner_id=alice.id)] == ["sent-whole"]


def test_a_multipart_body_with_broken_parts_gets_the_apis_json_answer(alice):
    # Twisted used to parse every form POST itself before Daphne handed the request on, and
    # answered one it could not parse with a bare, empty 400. `manage.py serve` turns that
    # parsing off: the API's own parser reads the body and answers in JSON.
    token = token_of(alice)
    with daphne(serve=True) as base:
        for method, path in (("POST", "/api/sessions/"), ("PATCH", "/api/sessions/anything/")):
            status, headers, body = exchange(
                base,
                raw_request(
                    method,
                    path,
                    token,
                    {"Content-Type": "multipart/form-data", "Content-Length": "7"},
                    b"garbage",
                ),
            )
            assert status == 400 and headers["content-type"].startswith("application/json")
            assert json.loads(body)["code"] == "parse_error"
    assert get_store().list(owner_id=alice.id) == []


MiB = 1024 * 1024
# Far below any of the bodies sent here: what the server may grow while refusing them.
MEMORY_BOUND = 50 * MiB
PIECE = b"x" * (64 * 1024)


def filler(size: int) -> Iterator[bytes]:
    """`size` bytes in pieces, none of them held at once by the test."""
    while size > 0:
        yield PIECE[: min(size, len(PIECE))]
        size -= len(PIECE)


def stream(base: str, head: bytes, body: Iterator[bytes]) -> tuple[int, dict, bytes, int]:
    """Send `head`, then the pieces of `body` until the server answers or stops reading;
    (status, headers, answer body, bytes of the body sent)."""
    host, port = base.removeprefix("http://").split(":")
    sent = 0
    stopped_early = True
    with socket.create_connection((host, int(port)), timeout=GUARD_SEC) as sock:
        sock.sendall(head)
        for piece in body:
            readable, _, _ = select.select([sock], [], [], 0)
            if readable:
                break
            try:
                sock.sendall(piece)
            except (BrokenPipeError, ConnectionResetError):
                break
            sent += len(piece)
        else:
            stopped_early = False
        if stopped_early:
            # Stopped early: a server lingering for the rest of the body need not wait.
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_WR)
        answer = b""
        try:
            while chunk := sock.recv(65536):
                answer += chunk
        except ConnectionResetError:
            pass
    head_part, _, answer_body = answer.partition(b"\r\n\r\n")
    status_line, *header_lines = head_part.decode("latin-1").split("\r\n")
    headers = {}
    for line in header_lines:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return int(status_line.split()[1]), headers, answer_body, sent


def request_head(method: str, path: str, headers: dict[str, str]) -> bytes:
    lines = [f"{method} {path} HTTP/1.1", "Host: 127.0.0.1", "Connection: close"]
    lines += [f"{name}: {value}" for name, value in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def json_pieces(prefix: bytes, size: int) -> Iterator[bytes]:
    """The start of a JSON document, then filler up to `size` bytes."""
    yield prefix
    yield from filler(size - len(prefix))


def memory_of(pid: int) -> dict[str, int]:
    """The process's resident memory now and at its peak, in bytes."""
    values = {}
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            name, _, value = line.partition(":")
            if name in {"VmRSS", "VmHWM"}:
                values[name] = int(value.split()[0]) * 1024
    return values


def assert_refused_as_too_large(status: int, headers: dict, body: bytes) -> None:
    assert status == 413
    assert headers["content-type"] == "application/json"
    assert json.loads(body)["code"] == "too_large"


def test_a_huge_form_body_without_credentials_is_refused_before_it_is_read():
    with daphne(serve=True) as server:
        before = memory_of(server.process.pid)
        size = 100 * MiB
        status, headers, body, sent = stream(
            server,
            request_head(
                "POST",
                "/healthz",
                {
                    "Content-Type": "multipart/form-data; boundary=b",
                    "Content-Length": str(size),
                },
            ),
            filler(size),
        )
        assert_refused_as_too_large(status, headers, body)
        assert sent < size
        grown = memory_of(server.process.pid)["VmHWM"] - before["VmHWM"]
        print(f"100 MiB multipart, {sent / MiB:.1f} MiB sent: peak grew {grown / MiB:.1f} MiB")
        assert grown < MEMORY_BOUND
        # The server still serves.
        status, _, body = exchange(server, b"GET /healthz HTTP/1.1\r\nConnection: close\r\n\r\n")
        assert status == 200


def test_a_huge_json_body_from_a_signed_in_user_is_refused_and_creates_nothing(alice):
    token = token_of(alice)
    with daphne(serve=True) as server:
        before = memory_of(server.process.pid)
        size = 200 * MiB
        prefix = b'{"id": "huge", "title": "'
        status, headers, body, sent = stream(
            server,
            request_head(
                "POST",
                "/api/sessions/",
                {
                    "Authorization": f"Token {token}",
                    "Content-Type": "application/json",
                    "Content-Length": str(size),
                },
            ),
            json_pieces(prefix, size),
        )
        assert_refused_as_too_large(status, headers, body)
        assert sent < size
        grown = memory_of(server.process.pid)["VmHWM"] - before["VmHWM"]
        print(f"200 MiB JSON, {sent / MiB:.1f} MiB sent: peak grew {grown / MiB:.1f} MiB")
        assert grown < MEMORY_BOUND
    assert get_store().list(owner_id=alice.id) == []


def chunk_pieces(size: int) -> Iterator[bytes]:
    for piece in filler(size):
        yield f"{len(piece):x}\r\n".encode() + piece + b"\r\n"
    yield b"0\r\n\r\n"


def test_a_body_sent_without_a_length_is_refused_once_it_passes_the_cap():
    with daphne(serve=True) as server:
        before = memory_of(server.process.pid)
        size = 100 * MiB
        status, headers, body, sent = stream(
            server,
            request_head(
                "POST",
                "/healthz",
                {"Content-Type": "application/octet-stream", "Transfer-Encoding": "chunked"},
            ),
            chunk_pieces(size),
        )
        assert_refused_as_too_large(status, headers, body)
        assert sent < size
        assert memory_of(server.process.pid)["VmHWM"] - before["VmHWM"] < MEMORY_BOUND


def test_the_import_takes_a_larger_body_only_from_a_client_with_credentials(alice):
    token = token_of(alice)
    import_cap = 4 * MiB
    size = 3 * MiB  # over DATA_UPLOAD_MAX_MEMORY_SIZE (2.5 MiB), under the import's cap
    head = {"Content-Type": "multipart/form-data; boundary=b", "Content-Length": str(size)}
    with daphne(serve=True, IMPORT_MAX_BYTES=import_cap) as server:
        # Anonymous: refused from its Content-Length, as any other path would be.
        status, headers, body, _ = stream(
            server, request_head("POST", "/api/import/", head), filler(size)
        )
        assert_refused_as_too_large(status, headers, body)
        # Signed in: the whole body reaches the import, which answers for itself (the form
        # has no file in it).
        status, headers, body, sent = stream(
            server,
            request_head("POST", "/api/import/", {**head, "Authorization": f"Token {token}"}),
            filler(size),
        )
        assert sent == size
        assert status == 400 and json.loads(body)["code"] != "too_large"
        # Over the import's own cap: refused before it is read, signed in or not.
        over = import_cap + 1024 * 1024
        status, headers, body, sent = stream(
            server,
            request_head(
                "POST",
                "/api/import/",
                {**head, "Content-Length": str(over), "Authorization": f"Token {token}"},
            ),
            filler(over),
        )
        assert_refused_as_too_large(status, headers, body)
        assert sent < over
