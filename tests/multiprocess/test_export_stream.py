"""`GET /api/me/export/` through the real server streams the zip as it is made: three exports
at once leave the server's peak memory far below the size of what they send, and each zip
holds exactly what was stored (docs/design.md §27)."""

import base64
import io
import json
import os
import threading
import urllib.request
import zipfile

import pytest

from sessions_app.store import get_store
from tests.builders import token_of, turn_entries
from tests.helpers import GUARD_SEC
from tests.multiprocess.servers import daphne
from tests.multiprocess.test_request_bodies import MiB, memory_of

pytestmark = pytest.mark.django_db(transaction=True)

SESSIONS = 128
ANSWER_CHARS = 128 * 1024
EXPORTS = 3


def fill(owner_id: int) -> dict[str, str]:
    """SESSIONS sessions of one turn each, whose answer is ANSWER_CHARS of text that does not
    compress much; {session id: answer}."""
    store = get_store()
    answers = {}
    for n in range(SESSIONS):
        session_id = f"big-{n}"
        answer = base64.b64encode(os.urandom(ANSWER_CHARS * 3 // 4)).decode()
        store.create(session_id, owner_id=owner_id)
        store.append(session_id, turn_entries(f"question {n}", answer))
        answers[session_id] = answer
    return answers


def export(base: str, token: str, opened: threading.Barrier | None = None) -> bytes:
    request = urllib.request.Request(
        base + "/api/me/export/", headers={"Authorization": f"Token {token}"}
    )
    with urllib.request.urlopen(request, timeout=GUARD_SEC) as response:
        assert response.status == 200
        first = response.read(64 * 1024)
        if opened is not None:
            # Every export has begun before any reads on: they run at the same time.
            opened.wait(GUARD_SEC)
        return first + response.read()


def test_three_exports_at_once_stream_their_zips(alice, bob):
    answers = fill(alice.id)
    get_store().create("small", owner_id=bob.id)
    token = token_of(alice)
    with daphne(serve=True) as server:
        export(server, token_of(bob))  # the code paths loaded before measuring
        before = memory_of(server.process.pid)
        opened = threading.Barrier(EXPORTS)
        zips: list[bytes] = []
        threads = [
            threading.Thread(target=lambda: zips.append(export(server, token, opened)))
            for _ in range(EXPORTS)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(GUARD_SEC)
        after = memory_of(server.process.pid)

    assert len(zips) == EXPORTS
    one_zip = min(len(data) for data in zips)
    assert one_zip > 16 * MiB  # what is at stake: each export is large
    grown = after["VmHWM"] - before["VmHWM"]
    print(f"three exports of {one_zip / MiB:.1f} MiB each: server peak grew {grown / MiB:.1f} MiB")
    # Less than one of the three zips (a zip built whole before its first byte: about 190
    # MiB here); the rest is a session's rendering per export and each request's thread.
    assert grown < one_zip
    for data in zips:
        archive = zipfile.ZipFile(io.BytesIO(data))
        assert archive.testzip() is None
        for session_id, answer in answers.items():
            exported = json.loads(archive.read(f"sessions/{session_id}.json"))
            assert exported["session"]["id"] == session_id
            said = [e["content"] for e in exported["entries"] if e["role"] == "assistant"]
            assert said == [answer]
            assert answer in archive.read(f"sessions/{session_id}.md").decode()
