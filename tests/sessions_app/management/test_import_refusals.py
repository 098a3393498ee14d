"""`import_sessions` refuses what the database would refuse halfway through, before it
writes anything, naming the file and line (docs/design.md §20, §27): NUL characters, a
title or an id wider than its column, JSON nested too deep; `--from` files over the budget
name the limit."""

import json

import pytest
from django.core.management import CommandError, call_command

from sessions_app.store import get_store
from tests.builders import assistant, user
from tests.sessions_app.formats.fixtures import chatgpt_export, regenerated_conversation
from tests.sessions_app.formats.hostile import zip_bomb

from .test_export_import_sessions import line, sessions_of, write_files

pytestmark = pytest.mark.django_db


def test_text_no_database_keeps_is_named_by_file_and_line(backend, bob, tmp_path):
    good = [line(1, user("hello", "")), line(2, assistant("hi", turn=""))]
    write_files(tmp_path, "good", good)
    write_files(tmp_path, "nul", [good[0], line(2, assistant("h\x00i", turn=""))])
    write_files(tmp_path, "titled", good, meta={"title": "x" * 201})
    write_files(tmp_path, "nultitle", good, meta={"title": "a\x00b"})
    write_files(tmp_path, "longcall", [good[0], {**good[1], "tool_call_id": "c" * 201}])
    write_files(tmp_path, "deep", [good[0], "[" * 100_000 + "]" * 100_000])

    with pytest.raises(CommandError) as failed:
        call_command("import_sessions", "--user", "bob", str(tmp_path))

    message = str(failed.value)
    assert f"{tmp_path / 'nul.jsonl'}:2: content may not contain NUL" in message
    assert f"{tmp_path / 'titled.meta.json'}:1: the title is longer than 200" in message
    assert f"{tmp_path / 'nultitle.meta.json'}:1: title may not contain NUL" in message
    assert f"{tmp_path / 'longcall.jsonl'}:2: tool_call_id is longer than 200" in message
    assert f"{tmp_path / 'deep.jsonl'}:2: JSON nested too deep" in message
    assert sessions_of(bob) == {}


def test_a_session_of_five_thousand_entries_imports_whole(backend, bob, tmp_path):
    entries = [
        line(seq, user(f"q{seq}", "") if seq % 2 else assistant(f"a{seq}", turn=""))
        for seq in range(1, 5_001)
    ]
    write_files(tmp_path, "long", entries)

    call_command("import_sessions", "--user", "bob", str(tmp_path))

    assert get_store().get_meta("long").last_seq == 5_000


def test_a_zip_bomb_from_the_command_line_imports_nothing(bob, tmp_path):
    bomb = zip_bomb(tmp_path / "export.zip", unpacked_mib=64)
    with pytest.raises(CommandError, match="nothing imported: .* times its compressed size"):
        call_command("import_sessions", "--user", "bob", "--from", "chatgpt", str(bomb))
    assert sessions_of(bob) == {}


def test_the_report_names_a_duplicate_conversation(bob, tmp_path, capsys):
    export = chatgpt_export(
        tmp_path / "c.json", regenerated_conversation(), regenerated_conversation()
    )
    call_command("import_sessions", "--user", "bob", "--from", "chatgpt", str(export))
    out = capsys.readouterr().out
    conversation_id = json.loads(export.read_text())[0]["conversation_id"]
    assert f"not imported {conversation_id}: conversations[1] has the same id" in out
    assert "2 of 3 session(s) imported" in out
