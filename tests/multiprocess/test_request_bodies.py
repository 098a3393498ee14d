"""Request bodies that reach the API through a real Daphne, sent byte by byte on a socket:
what a client gets for a chunked body and for a multipart body Daphne's HTTP server cannot
parse (README, "Request bodies")."""

import json
import socket

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


def test_a_multipart_body_daphne_cannot_parse_is_refused_before_the_application(alice):
    # Twisted parses every form POST itself before Daphne hands the request on, and answers
    # one it cannot parse with a bare 400: the README says so; this keeps it honest.
    token = token_of(alice)
    with daphne() as base:
        status, _, body = exchange(
            base,
            raw_request(
                "POST",
                "/api/sessions/",
                token,
                {"Content-Type": "multipart/form-data", "Content-Length": "7"},
                b"garbage",
            ),
        )
        assert status == 400 and body == b""
        # A method Twisted leaves alone reaches the API, which answers in JSON.
        status, headers, body = exchange(
            base,
            raw_request(
                "PATCH",
                "/api/sessions/anything/",
                token,
                {"Content-Type": "multipart/form-data", "Content-Length": "7"},
                b"garbage",
            ),
        )
        assert status == 400 and headers["content-type"].startswith("application/json")
        assert json.loads(body)["code"] == "parse_error"
    assert get_store().list(owner_id=alice.id) == []
