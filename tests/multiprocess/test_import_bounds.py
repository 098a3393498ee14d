"""Imports measure before they parse (docs/design.md §27), seen from outside a real worker:
a 2 MB zip of 100 MB of `[[],[],…]` (under the unpacked-size and compression-ratio caps)
peaked at 5.36 GB before it was refused, and an openai-agents database whose
`message_data` is a generated column expanded a few KB into gigabytes. Both are refused now
with the worker's peak less than 200 MB higher."""

import io
import json
import os
import sqlite3
import zipfile

import pytest

from tests.builders import token_of
from tests.multiprocess.servers import daphne
from tests.multiprocess.test_file_read_bounds import call
from tests.multiprocess.test_request_bodies import memory_of
from tests.sessions_app.files.helpers import multipart

pytestmark = pytest.mark.django_db(transaction=True)

MiB = 1024 * 1024


def brackets_zip(unpacked: int) -> bytes:
    """conversations.json of `unpacked` bytes of empty lists, a random whitespace byte after
    every eighth so that it packs only about 45 times (the cap is 100)."""
    group = b"[]," * 7 + b"[]"
    groups = unpacked // (len(group) + 2)
    whitespace = os.urandom(groups).translate(bytes(b" \n\t\r"[n % 4] for n in range(256)))
    body = b"[" + b",".join(group + whitespace[n : n + 1] for n in range(groups)) + b"]"
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("conversations.json", body)
    return out.getvalue()


def generated_column_database(path) -> bytes:
    """An SQLiteSession database whose every message_data is computed when read: 60 MB of
    `[],` from a row of a few bytes."""
    connection = sqlite3.connect(path)
    connection.executescript(
        """
        CREATE TABLE agent_sessions (session_id TEXT PRIMARY KEY, created_at TIMESTAMP);
        CREATE TABLE agent_messages (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            session_id TEXT,
            size INTEGER,
            message_data TEXT GENERATED ALWAYS AS
                ('[' || replace(hex(zeroblob(size)), '00', '[],') || '[]]') VIRTUAL
        );
        INSERT INTO agent_sessions VALUES ('s', '2025-01-01 00:00:00');
        INSERT INTO agent_messages (session_id, size) VALUES ('s', 20000000), ('s', 20000000),
            ('s', 20000000);
        """
    )
    connection.commit()
    connection.close()
    return path.read_bytes()


def send_import(server: str, token: str, content: bytes, name: str):
    body, content_type = multipart(content, name)
    status, answer = call(f"{server}/api/import/", token, body, content_type)
    return status, json.loads(answer)


@pytest.fixture
def server(alice):
    with daphne(serve=True) as server:
        # The code paths loaded before measuring.
        assert send_import(server, token_of(alice), b"[]", "conversations.json")[0] == 200
        yield server


def peak_growth(server, send) -> tuple[int, dict]:
    before = memory_of(server.process.pid)["VmHWM"]
    status, answer = send()
    return memory_of(server.process.pid)["VmHWM"] - before, (status, answer)


def test_a_zip_of_a_hundred_megabytes_of_empty_lists_is_refused_before_it_is_parsed(alice, server):
    packed = brackets_zip(100 * MiB)
    assert len(packed) < 3 * MiB
    grown, (status, answer) = peak_growth(
        server, lambda: send_import(server, token_of(alice), packed, "export.zip")
    )
    print(f"the {len(packed) / MiB:.1f} MiB zip: {status}, the peak grew {grown / MiB:.1f} MiB")
    assert status == 413, answer
    assert answer["code"] == "import_too_large"
    assert "IMPORT_MAX_JSON_VALUES" in answer["detail"]
    assert grown < 200 * MiB


def test_a_database_whose_items_are_a_generated_column_is_refused(alice, server, tmp_path):
    database = generated_column_database(tmp_path / "agents.db")
    assert len(database) < 64 * 1024
    grown, (status, answer) = peak_growth(
        server, lambda: send_import(server, token_of(alice), database, "agents.db")
    )
    print(f"the {len(database)} byte database: {status}, the peak grew {grown / MiB:.1f} MiB")
    assert status == 400, answer
    assert answer["code"] == "not_an_openai_agents_database"
    assert "message_data is a generated column" in answer["detail"]
    assert grown < 200 * MiB
