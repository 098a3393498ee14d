"""Reading an uploaded file cannot cost a worker gigabytes or minutes (docs/design.md §27),
measured from outside a real Daphne worker:
- the thumbnail of a 10 KB 1-bit PNG of 9400×9400 (under Pillow's pixel limit) raised the
  worker by about 0.7 GB per request; four at once now raise its peak by less than 100 MB,
  and the thumbnail, made once, is kept;
- a 100-page PDF whose pages share one heavy content stream took a core for minutes, and went
  on after its client left; it is now read, or refused, within 10 s by a reader process that
  is gone by then, and a reader whose client left ends with the request.

Each wait for a reader's end is the kernel's word (the process's pidfd becomes readable when
it exits), never a nap."""

import io
import json
import os
import select
import socket
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from PIL import Image

from sessions_app.services import sessions
from tests.builders import token_of
from tests.helpers import GUARD_SEC, eventually
from tests.multiprocess.servers import daphne
from tests.multiprocess.test_request_bodies import memory_of
from tests.sessions_app.files.helpers import multipart, png_bytes, shared_stream_pdf

pytestmark = pytest.mark.django_db(transaction=True)

MiB = 1024 * 1024


def call(
    url: str, token: str, body: bytes | None = None, content_type: str = "", timeout=GUARD_SEC
):
    """(status, body bytes) of one request with a token."""
    headers = {"Authorization": f"Token {token}"}
    if content_type:
        headers["Content-Type"] = content_type
    request = urllib.request.Request(url, data=body, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def upload(server: str, token: str, session_id: str, content: bytes, name: str, timeout=GUARD_SEC):
    body, content_type = multipart(content, name)
    status, answer = call(
        f"{server}/api/sessions/{session_id}/files/", token, body, content_type, timeout
    )
    return status, json.loads(answer)


def one_bit_png(side: int) -> bytes:
    out = io.BytesIO()
    Image.new("1", (side, side), 1).save(out, format="PNG", optimize=True)
    return out.getvalue()


def children_of(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        found += [int(child) for child in (task / "children").read_text().split()]
    return found


def readers_of(pid: int) -> list[int]:
    """The worker's file readers now (jarvis_site.shared.bounded's child processes)."""
    found = []
    for child in children_of(pid):
        try:
            command = Path(f"/proc/{child}/cmdline").read_bytes()
        except FileNotFoundError:
            continue  # gone meanwhile
        if b"jarvis_site.shared.bounded_child" in command:
            found.append(child)
    return found


def exited(pids: list[int], limit: float = GUARD_SEC) -> bool:
    """Whether every process of `pids` exits within `limit`: each one's pidfd becomes
    readable when it does."""
    descriptors = []
    for pid in pids:
        try:
            descriptors.append(os.pidfd_open(pid))
        except ProcessLookupError:
            pass  # exited already
    try:
        waiting = select.poll()
        for descriptor in descriptors:
            waiting.register(descriptor, select.POLLIN)
        left = set(descriptors)
        deadline = time.monotonic() + limit
        while left:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            for descriptor, _ in waiting.poll(remaining * 1000):
                waiting.unregister(descriptor)
                left.discard(descriptor)
        return True
    finally:
        for descriptor in descriptors:
            os.close(descriptor)


def test_four_thumbnails_of_a_huge_one_bit_png_at_once_cost_the_worker_little(alice, tmp_path):
    sessions.session_create(owner_id=alice.id, session_id="pics")
    token = token_of(alice)
    blobs = tmp_path / "server-blobs"
    huge = one_bit_png(9400)
    assert len(huge) < 64 * 1024
    with daphne(serve=True, BLOB_STORAGE_URL=f"file://{blobs}") as server:
        status, small = upload(server, token, "pics", png_bytes(600, 400), "small.png")
        assert status == 201, small
        status, big = upload(server, token, "pics", huge, "huge.png")
        assert status == 201, big
        assert (big["width"], big["height"]) == (9400, 9400)
        # The code paths loaded before measuring.
        assert call(f"{server}/api/sessions/pics/files/{small['id']}/thumb/", token)[0] == 200
        before = memory_of(server.process.pid)

        answers = []
        ready = threading.Barrier(4)

        def thumb():
            ready.wait(GUARD_SEC)
            answers.append(call(f"{server}/api/sessions/pics/files/{big['id']}/thumb/", token))

        threads = [threading.Thread(target=thumb) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(GUARD_SEC)
        after = memory_of(server.process.pid)

    grown = after["VmHWM"] - before["VmHWM"]
    print(f"four thumbnails of a 9400x9400 1-bit PNG: the worker's peak grew {grown / MiB:.1f} MiB")
    assert grown < 100 * MiB
    assert [status for status, _ in answers] == [200] * 4
    with Image.open(io.BytesIO(answers[0][1])) as preview:
        assert preview.size == (256, 256)
    # Made once and kept beside the image's bytes: later requests decode nothing.
    assert len(list(blobs.rglob(f"{big['id']}.thumb.png"))) == 1


def test_a_pdf_of_pages_sharing_one_heavy_stream_is_done_with_in_seconds(alice):
    sessions.session_create(owner_id=alice.id, session_id="docs")
    token = token_of(alice)
    pdf = shared_stream_pdf(pages=100, operators=300_000)
    with daphne(serve=True) as server:
        started = time.monotonic()
        # Waiting longer than the 10 s it may take proves nothing more.
        status, answer = upload(server, token, "docs", pdf, "report.pdf", timeout=15)
        took = time.monotonic() - started
        print(f"the shared-stream PDF of {len(pdf)} bytes: {status} after {took:.1f} s")
        assert status in (201, 415), answer
        assert took < 10
        if status == 415:
            assert answer["code"] == "unsupported_file"
            assert "within the limits" in answer["detail"]

        # The answer came from a reader that is gone with it: nothing of the file goes on.
        assert readers_of(server.process.pid) == []


def test_the_pdf_reader_dies_with_the_request_its_client_left(alice):
    sessions.session_create(owner_id=alice.id, session_id="docs")
    token = token_of(alice)
    pdf = shared_stream_pdf(pages=100, operators=300_000)
    body, content_type = multipart(pdf, "report.pdf")
    # The reader's own limits out of the test's reach: only the request's end can stop it
    # within the guard.
    out_of_reach = GUARD_SEC * 4
    with daphne(
        serve=True, FILE_READ_CPU_SEC=out_of_reach, FILE_READ_WALL_SEC=out_of_reach
    ) as server:
        host, port = server.removeprefix("http://").rsplit(":", 1)
        head = (
            f"POST /api/sessions/docs/files/ HTTP/1.1\r\nHost: {host}:{port}\r\n"
            f"Authorization: Token {token}\r\nContent-Type: {content_type}\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
        )
        with socket.create_connection((host, int(port)), timeout=GUARD_SEC) as client:
            client.sendall(head.encode() + body)
            readers = eventually(
                lambda: readers_of(server.process.pid), what="the PDF's reader started"
            )
        # The client left while its file was being read: the reader ends with the request.
        assert exited(readers)
        assert readers_of(server.process.pid) == []
