"""Bring your history (docs/design.md §21): a ChatGPT export and an openai-agents database
become sessions — the shown path a session, every other path a branch of it at the seq
where it leaves — with histories both providers accept, a report of what was dropped, and
nothing added by importing again."""

from io import StringIO

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command

from sessions_app.runtime.context.history import (
    project_anthropic,
    project_openai,
    validate_anthropic,
    validate_openai,
)
from sessions_app.services.foreign_import import history_import
from sessions_app.store import get_store
from tests.conftest import requires_postgres
from tests.helpers import run_in_threads

from .fixtures import (
    chatgpt_export,
    code_conversation,
    openai_agents_database,
    regenerated_conversation,
)

pytestmark = pytest.mark.django_db


def _import(path, source="chatgpt", *flags) -> str:
    out = StringIO()
    call_command(
        "import_sessions", "--user", "alice", "--from", source, str(path), *flags, stdout=out
    )
    return out.getvalue()


def _messages(session_id) -> list[tuple[str, str]]:
    return [
        (entry.role, entry.content or entry.tool_calls[0]["name"])
        for entry in get_store().get_messages(session_id)
        if entry.kind == "message"
    ]


def _providers_accept(session_id) -> None:
    records = get_store().get_messages(session_id)
    validate_openai(project_openai(records, "system"))
    validate_anthropic(project_anthropic(records, "system")[1])


def test_a_regenerated_answer_imports_as_two_sessions_the_branch_at_the_right_seq(
    backend, alice, bob, tmp_path
):
    export = chatgpt_export(tmp_path / "conversations.json", regenerated_conversation())

    report = _import(export)

    store = get_store()
    sessions = {meta.id: meta for meta in store.list(owner_id=alice.id)}
    assert len(sessions) == 2, report
    (main,) = [meta for meta in sessions.values() if meta.parent_id is None]
    (branch,) = [meta for meta in sessions.values() if meta.parent_id is not None]
    assert main.title == "Capitals"
    assert _messages(main.id) == [
        ("user", "What is the capital of France?"),
        ("assistant", "The capital of France is Paris."),
        ("user", "And of Germany?"),
        ("assistant", "Berlin."),
    ]
    assert branch.parent_id == main.id
    assert branch.branched_at_seq == 1  # both share the question; they part at the answer
    assert _messages(branch.id) == [
        ("user", "What is the capital of France?"),
        ("assistant", "Paris."),
    ]
    for session_id in sessions:
        _providers_accept(session_id)
    assert f"a branch of {main.id} at seq 1" in report
    assert store.list(owner_id=bob.id) == []

    again = _import(export)
    assert "0 of 2 session(s) imported" in again
    assert {meta.id for meta in store.list(owner_id=alice.id)} == set(sessions)


def test_code_and_its_output_become_a_tool_call_and_the_report_says_what_was_dropped(
    alice, tmp_path
):
    export = chatgpt_export(tmp_path / "conversations.json", code_conversation())

    report = _import(export)

    (meta,) = get_store().list(owner_id=alice.id)
    entries = [e for e in get_store().get_messages(meta.id) if e.kind == "message"]
    assert [(e.role, e.content) for e in entries] == [
        ("user", "What is 2**10?"),
        ("assistant", ""),
        ("tool", "1024"),
        ("assistant", "2**10 is 1024."),
    ]
    call = entries[1].tool_calls[0]
    assert (call["name"], call["arguments"]) == ("python", '{"code": "2**10"}')
    assert entries[2].tool_call_id == call["id"] and entries[2].name == "python"
    _providers_accept(meta.id)
    assert "1 image or file attachment(s) dropped" in report
    assert "1 tool message(s) that answer no call dropped" in report


def test_a_dry_run_reports_and_writes_nothing(alice, tmp_path):
    export = chatgpt_export(tmp_path / "c.json", regenerated_conversation(), code_conversation())
    report = _import(export, "chatgpt", "--dry-run")
    assert "3 of 3 session(s) would be imported" in report
    assert get_store().list(owner_id=alice.id) == []


def test_an_openai_agents_database_maps_function_calls_to_tool_calls(backend, alice, tmp_path):
    database = openai_agents_database(tmp_path / "agents.db")

    report = _import(database, "openai-agents")

    (meta,) = get_store().list(owner_id=alice.id)
    assert meta.title == "support-42"
    entries = [e for e in get_store().get_messages(meta.id) if e.kind == "message"]
    assert [e.role for e in entries] == ["user", "assistant", "tool", "assistant"]
    assert entries[1].tool_calls == [
        {"id": "call_weather_1", "name": "get_weather", "arguments": '{"city": "Paris"}'}
    ]
    assert (entries[2].tool_call_id, entries[2].content) == ("call_weather_1", "sunny, 21C")
    assert entries[3].content == "It is sunny and 21°C in Paris."
    _providers_accept(meta.id)
    assert "1 reasoning item(s) dropped" in report
    assert "0 of 1 session(s) imported" in _import(database, "openai-agents")


def _upload(api, name, content, **fields):
    return api.post(
        "/api/import/",
        {"file": SimpleUploadedFile(name, content), **fields},
        format="multipart",
    )


def test_the_page_uploads_an_export_and_gets_the_report(api, alice, tmp_path):
    export = chatgpt_export(tmp_path / "c.json", regenerated_conversation())
    answer = _upload(api, "conversations.json", export.read_bytes())
    assert answer.status_code == 200, answer.json()
    body = answer.json()
    assert (body["source"], body["imported"], body["unchanged"]) == ("chatgpt", 2, 0)
    branch = next(s for s in body["sessions"] if s["parent_id"])
    assert branch["branched_at_seq"] == 1

    database = openai_agents_database(tmp_path / "agents.db")
    answer = _upload(api, "agents.db", database.read_bytes())
    assert (answer.json()["source"], answer.json()["imported"]) == ("openai-agents", 1)
    assert len(get_store().list(owner_id=alice.id)) == 3


@pytest.mark.parametrize(
    ("content", "fields", "code"),
    [
        (b"hello, not json", {}, "not_a_chatgpt_export"),
        (b'{"conversations": []}', {}, "not_a_chatgpt_export"),
        (b'[{"title": "no mapping"}]', {}, "not_a_chatgpt_export"),
        (b"[]", {"source": "openai-agents"}, "not_an_openai_agents_database"),
        (b"SQLite format 3\x00" + b"\x00" * 100, {}, "not_an_openai_agents_database"),
    ],
)
def test_a_file_that_is_not_what_it_claims_is_refused_and_changes_nothing(
    api, alice, content, fields, code
):
    answer = _upload(api, "conversations.json", content, **fields)
    assert answer.status_code == 400
    assert answer.json()["code"] == code
    assert get_store().list(owner_id=alice.id) == []


def test_a_file_over_the_limit_is_refused(api, alice, settings, tmp_path):
    settings.IMPORT_MAX_BYTES = 100
    export = chatgpt_export(tmp_path / "c.json", regenerated_conversation())
    answer = _upload(api, "conversations.json", export.read_bytes())
    assert answer.status_code == 400 and answer.json()["code"] == "file_too_large"


@requires_postgres
@pytest.mark.django_db(transaction=True)
def test_two_uploads_of_one_export_at_once_add_each_session_once(alice, tmp_path):
    export = chatgpt_export(tmp_path / "c.json", regenerated_conversation(), code_conversation())

    reports = run_in_threads(
        lambda _: history_import(owner_id=alice.id, source="chatgpt", path=export), 2
    )

    assert len(get_store().list(owner_id=alice.id)) == 3
    # Each session was made by one of them; the other found it imported.
    assert sum(report.count(imported=True) for report in reports) == 3


def test_without_a_current_node_the_leaf_written_last_is_the_conversation(alice, tmp_path):
    conversation = regenerated_conversation()
    del conversation["current_node"]
    conversation["mapping"]["a2"]["message"]["create_time"] += 10
    _import(chatgpt_export(tmp_path / "c.json", conversation))

    (main,) = [m for m in get_store().list(owner_id=alice.id) if m.parent_id is None]
    assert _messages(main.id)[-1] == ("assistant", "Berlin.")
