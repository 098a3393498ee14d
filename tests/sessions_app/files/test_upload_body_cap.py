"""docs/design.md §23 and §27 through `manage.py serve`: a file upload may send a body up to
UPLOAD_MAX_BYTES (beyond the 2.5 MiB every other request gets), and only with credentials;
over it, 413 before the body is read."""

import json

import pytest

from sessions_app.store import get_store
from tests.builders import token_of
from tests.multiprocess.servers import daphne
from tests.multiprocess.test_request_bodies import (
    assert_refused_as_too_large,
    request_head,
    stream,
)

pytestmark = pytest.mark.django_db(transaction=True)

MiB = 1024 * 1024


def multipart(content: bytes, name: str = "big.txt") -> tuple[bytes, str]:
    boundary = "jarvis-boundary"
    body = (
        (
            f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="{name}"\r\n'
            "Content-Type: text/plain\r\n\r\n"
        ).encode()
        + content
        + f"\r\n--{boundary}--\r\n".encode()
    )
    return body, f"multipart/form-data; boundary={boundary}"


def test_a_file_upload_takes_up_to_upload_max_bytes_from_a_signed_in_client(alice, tmp_path):
    get_store().create("big", owner_id=alice.id)
    token = token_of(alice)
    body, content_type = multipart(b"a line of a long log file\n" * (3 * MiB // 26))
    head = {"Content-Type": content_type, "Content-Length": str(len(body))}
    path = "/api/sessions/big/files/"
    with daphne(
        serve=True, UPLOAD_MAX_BYTES=str(4 * MiB), BLOB_STORAGE_URL=f"file://{tmp_path}"
    ) as server:
        status, headers, answer, _ = stream(server, request_head("POST", path, head), iter([body]))
        assert_refused_as_too_large(status, headers, answer)  # anonymous: the usual cap

        signed_in = {**head, "Authorization": f"Token {token}"}
        status, _headers, answer, sent = stream(
            server, request_head("POST", path, signed_in), iter([body])
        )
        assert sent == len(body)
        assert status == 201, answer
        assert json.loads(answer)["mime"] == "text/plain"

        over = {**signed_in, "Content-Length": str(5 * MiB)}
        status, headers, answer, sent = stream(
            server, request_head("POST", path, over), iter([body, body])
        )
        assert_refused_as_too_large(status, headers, answer)
