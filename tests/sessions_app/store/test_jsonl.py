"""What only the jsonl backend can get wrong: files on disk (docs/design.md §4).

A crash mid-write leaves a torn last line, which is ignored and reported, then cut off by
the next append; any other damage is an error naming the file and line, and never an
overwrite. Ids cannot name files outside SESSIONS_DIR, and listing reads meta files only.
"""

import builtins
import io
import json
import logging
import os
from pathlib import Path

import pytest

from sessions_app.runtime.context.history import repair_entries
from sessions_app.store import CorruptSessionFile, InvalidSessionId, NewEntry
from sessions_app.store.jsonl import JsonlSessionStore
from tests.builders import assistant, user


@pytest.fixture
def store(settings):
    return JsonlSessionStore(settings.SESSIONS_DIR)


def entry_file(store, session_id) -> Path:
    return store.root / f"{session_id}.jsonl"


def session_with_three_entries(store, session_id="s1") -> Path:
    store.create(session_id)
    store.append(session_id, [user("one"), assistant("two")])
    store.append(session_id, [user("three")])
    return entry_file(store, session_id)


def tree(root: Path) -> list[str]:
    return sorted(str(path.relative_to(root)) for path in root.rglob("*"))


# --- torn last line ---------------------------------------------------------------------


def test_a_torn_last_line_is_ignored_on_read_and_reported(store, caplog):
    path = session_with_three_entries(store)
    with open(path, "ab") as handle:  # a crash after part of the next batch reached the disk
        handle.write(b'{"seq": 4, "kind": "message", "role": "user", "content": "fo')

    with caplog.at_level(logging.WARNING, logger="sessions_app.store.jsonl"):
        loaded = store.get_messages("s1")

    assert [entry.content for entry in loaded] == ["one", "two", "three"]
    warnings = [record.getMessage() for record in caplog.records]
    assert any(str(path) in message and "torn" in message for message in warnings), warnings


def test_a_complete_json_object_without_its_line_end_is_still_torn(store, caplog):
    path = session_with_three_entries(store)
    line = b'{"seq": 4, "kind": "message", "role": "user", "content": "four", '
    line += b'"created_at": "2025-01-01T00:00:00+00:00"}'
    with open(path, "ab") as handle:
        handle.write(line)  # the newline ends every durable write; without it, nothing counts

    with caplog.at_level(logging.WARNING, logger="sessions_app.store.jsonl"):
        assert [entry.seq for entry in store.get_messages("s1")] == [1, 2, 3]
    assert "torn" in caplog.text


def test_the_next_append_cuts_off_a_torn_line_and_continues_the_seqs(store, caplog):
    path = session_with_three_entries(store)
    with open(path, "ab") as handle:
        handle.write(b'{"seq": 4, "kind": "mess')

    with caplog.at_level(logging.WARNING, logger="sessions_app.store.jsonl"):
        written = store.append("s1", [user("four"), assistant("five")])
    assert "torn last line" in caplog.text

    assert [entry.seq for entry in written] == [4, 5]
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="sessions_app.store.jsonl"):
        loaded = store.get_messages("s1")
    assert [entry.seq for entry in loaded] == [1, 2, 3, 4, 5]
    assert [entry.content for entry in loaded] == ["one", "two", "three", "four", "five"]
    assert caplog.records == []  # the file is whole again
    assert [json.loads(line)["seq"] for line in path.read_bytes().splitlines()] == [1, 2, 3, 4, 5]
    assert store.get_meta("s1").last_seq == 5


def test_a_torn_first_line_leaves_an_empty_history_that_starts_again_at_one(store):
    store.create("s1")
    path = entry_file(store, "s1")
    path.write_bytes(b'{"seq": 1, "ki')

    assert store.get_messages("s1") == []
    assert [entry.seq for entry in store.append("s1", [user("again")])] == [1]
    assert [entry.content for entry in store.get_messages("s1")] == ["again"]


# --- other damage -----------------------------------------------------------------------


def damage_line(path: Path, number: int, replacement: bytes) -> bytes:
    lines = path.read_bytes().split(b"\n")
    lines[number - 1] = replacement
    damaged = b"\n".join(lines)
    path.write_bytes(damaged)
    return damaged


def test_a_damaged_middle_line_is_an_error_naming_file_and_line(store):
    path = session_with_three_entries(store)
    damaged = damage_line(path, 2, b'{"seq": 2, "kind": "message", "content": "tw')

    with pytest.raises(CorruptSessionFile) as raised:
        store.get_messages("s1")
    assert str(path) in str(raised.value)
    assert f"{path}:2:" in str(raised.value)
    assert raised.value.line == 2
    # Copying a damaged history is refused too, and nothing was rewritten to "fix" it.
    with pytest.raises(CorruptSessionFile):
        store.create_branch("s1", new_id="copy")
    assert path.read_bytes() == damaged
    assert store.get_meta("copy") is None


def test_a_gap_in_the_seqs_is_an_error_naming_the_line(store):
    path = session_with_three_entries(store)
    original = path.read_bytes()
    damaged = original.replace(b'"seq": 2,', b'"seq": 7,')
    assert damaged != original
    path.write_bytes(damaged)

    with pytest.raises(CorruptSessionFile) as raised:
        store.get_messages("s1")
    assert raised.value.line == 2
    assert path.read_bytes() == damaged


def test_a_damaged_complete_last_line_refuses_the_next_append(store):
    path = session_with_three_entries(store)
    damaged = damage_line(path, 3, b"not json at all")
    assert damaged.endswith(b"\n")  # complete line: damage, not a torn write

    with pytest.raises(CorruptSessionFile) as raised:
        store.append("s1", [user("four")])
    assert f"{path}:3:" in str(raised.value)
    assert path.read_bytes() == damaged


def test_a_damaged_meta_file_is_an_error_naming_the_file(store):
    store.create("s1")
    meta = store.root / "s1.meta.json"
    meta.write_text("{not json")

    with pytest.raises(CorruptSessionFile) as raised:
        store.get_meta("s1")
    assert str(meta) in str(raised.value)
    assert meta.read_text() == "{not json"


# --- ids cannot escape the directory ----------------------------------------------------


@pytest.mark.parametrize("bad_id", ["../x", "/etc/x", ".hidden", "a/../../x", "..", "./x"])
def test_bad_ids_create_no_file_anywhere(store, bad_id, tmp_path):
    store.create("ok")
    store.append("ok", [user("hi")])
    before = tree(tmp_path)

    attempts = [
        lambda: store.create(bad_id),
        lambda: store.get_meta(bad_id),
        lambda: store.get_messages(bad_id),
        lambda: store.append(bad_id, [user("hi")]),
        lambda: store.delete(bad_id),
        lambda: store.create_branch("ok", new_id=bad_id),
        lambda: store.create_branch(bad_id, new_id="fine"),
        lambda: store.append_proactive(bad_id, "m1", "hello"),
        lambda: store.get_proactive(bad_id),
    ]
    for attempt in attempts:
        with pytest.raises(InvalidSessionId):
            attempt()

    assert tree(tmp_path) == before
    assert not Path("/etc/x").exists()
    assert not (tmp_path / "x").exists()
    assert not list(store.root.glob(".*"))


# --- list reads meta files only ---------------------------------------------------------


def test_list_of_many_sessions_opens_no_entry_file(store, monkeypatch):
    for number in range(150):
        session_id = f"s{number:03d}"
        store.create(session_id, title=f"session {number}")
        store.append(session_id, [user("a question " * 20), assistant("an answer " * 20)])

    opened: list[str] = []

    def spy(real):
        def wrapper(file, *args, **kwargs):
            opened.append(os.fspath(file) if not isinstance(file, int) else f"fd:{file}")
            return real(file, *args, **kwargs)

        return wrapper

    # builtins.open and io.open are the same function, but pathlib calls it as io.open, so
    # both names are replaced; os.open catches anything going below the io layer.
    monkeypatch.setattr(builtins, "open", spy(builtins.open))
    monkeypatch.setattr(io, "open", spy(io.open))
    monkeypatch.setattr(os, "open", spy(os.open))

    listed = store.list()

    monkeypatch.undo()
    assert len(listed) == 150
    assert sum(path.endswith(".meta.json") for path in opened) >= 150  # the spy saw the reads
    assert [path for path in opened if path.endswith(".jsonl")] == []


# --- meta activity lines and byte-for-byte branches --------------------------------------


def test_meta_follows_every_append_and_stays_small(store):
    store.create("s1", title="kept")
    for turn in range(120):
        store.append("s1", [user(f"q{turn}"), assistant(f"a{turn}")])
        meta = store.get_meta("s1")
        assert meta.last_seq == 2 * turn + 2
    meta_file = store.root / "s1.meta.json"
    assert meta_file.stat().st_size <= 4096 + 200  # compacted as it grows
    assert [listed.last_seq for listed in store.list()] == [240]
    assert store.get_meta("s1").title == "kept"
    assert store.get_meta("s1").updated_at == store.get_messages("s1")[-1].created_at


def test_a_torn_meta_update_is_ignored_and_the_next_append_corrects_it(store, caplog):
    store.create("s1")
    store.append("s1", [user("one")])
    meta_file = store.root / "s1.meta.json"
    with open(meta_file, "ab") as handle:
        handle.write(b'{"last_seq": 9')  # a crash mid-write of an activity line

    assert store.get_meta("s1").last_seq == 1
    store.append("s1", [user("two")])
    assert store.get_meta("s1").last_seq == 2
    assert [entry.seq for entry in store.get_messages("s1")] == [1, 2]


def test_a_branch_copies_the_lines_byte_for_byte(store):
    path = session_with_three_entries(store)
    store.append("s1", [user("four")])

    store.create_branch("s1", new_id="whole")
    store.create_branch("s1", new_id="prefix", at_seq=2)

    original = path.read_bytes()
    assert entry_file(store, "whole").read_bytes() == original
    lines = original.splitlines(keepends=True)
    assert entry_file(store, "prefix").read_bytes() == b"".join(lines[:2])
    assert [entry.content for entry in store.get_messages("prefix")] == ["one", "two"]


def test_a_nested_kind_in_data_is_not_taken_for_a_turn_marker(store):
    store.create("s1")
    store.append(
        "s1",
        [
            NewEntry(kind="turn_start", turn_id="t1", data={"model": "offline"}),
            user("question"),
            NewEntry(
                role="assistant",
                content="",
                turn_id="t1",
                tool_calls=[{"id": "c1", "name": "calculator", "arguments": "{}"}],
            ),
        ],
    )
    # A later unknown entry whose data mentions a closed turn must not hide the open one.
    store.append("s1", [NewEntry(kind="note", data={"kind": "turn_end", "status": "completed"})])

    tail = store.get_turn_tail("s1", 4)
    assert [entry.seq for entry in tail] == [1, 2, 3, 4]  # from the open turn's start
    meta = store.create_branch("s1", new_id="copy", closing=repair_entries(tail))

    copied = store.get_messages("copy")
    assert [entry.kind for entry in copied[-2:]] == ["message", "turn_end"]
    assert copied[-2].tool_call_id == "c1" and copied[-2].is_error
    assert copied[-1].data["status"] == "interrupted"
    assert meta.last_seq == copied[-1].seq == 6
