"""An import costs what the file is worth, not what its author chooses (docs/design.md §27):
a branch-heavy tree writes entries in proportion to its nodes, a zip bomb and an exploding
SQLite view are refused while being read, odd but well-formed JSON answers 400 naming where
or imports correctly — never a 500 — and the report names every conversation."""

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from sessions_app.formats import ImportLimits, chatgpt_read
from sessions_app.formats.base import ENTRIES_PER_NODE
from sessions_app.models import ImportedSession
from sessions_app.services.foreign_import import history_import
from sessions_app.store import get_store

from .fixtures import _node, regenerated_conversation
from .hostile import (
    agents_database_with_a_large_schema,
    agents_database_with_a_view,
    agents_database_with_a_virtual_table,
    agents_database_with_rows,
    branch_heavy,
    chain,
    conversation,
    stored_zip,
    zip_bomb,
)

pytestmark = pytest.mark.django_db


def _upload(api, content: bytes, name="conversations.json", **fields):
    return api.post(
        "/api/import/",
        {"file": SimpleUploadedFile(name, content), **fields},
        format="multipart",
    )


def _export(*conversations) -> bytes:
    return json.dumps(list(conversations)).encode()


def _sessions(user):
    return get_store().list(owner_id=user.id)


def _entries_written(user) -> int:
    return sum(meta.last_seq for meta in _sessions(user))


# --- trees ---------------------------------------------------------------------------------


def test_a_branch_heavy_tree_writes_entries_in_proportion_to_its_nodes(api, alice):
    tree = branch_heavy(400)  # 800 nodes; a fork at every depth
    nodes = len(tree["mapping"])

    answer = _upload(api, _export(tree))

    assert answer.status_code == 200, answer.json()
    # Every path copied whole per leaf would be 399 branches and about 80,000 entries.
    assert _entries_written(alice) <= ENTRIES_PER_NODE * (nodes + 1)
    (main,) = [s for s in answer.json()["sessions"] if s["parent_id"] is None]
    assert main["imported"] and main["entries"] == 400
    (left_out,) = [note for note in main["notes"] if "branch(es) left out" in note]
    assert "IMPORT_MAX_ENTRIES" in left_out
    made = len(_sessions(alice))
    assert made == answer.json()["imported"] and made < 200


def test_reading_a_tree_visits_each_node_a_bounded_number_of_times(settings):
    settings.IMPORT_MAX_ENTRIES = 10**9  # no entry budget: only the walk is counted
    small, large = branch_heavy(100), branch_heavy(400)
    limits = ImportLimits.from_settings()

    walked_small = chatgpt_read(_export(small), limits).nodes_walked
    walked_large = chatgpt_read(_export(large), limits).nodes_walked

    # Linear: four times the nodes, about four times the walk (a quadratic walk: sixteen).
    assert walked_large <= 5 * walked_small
    assert walked_large <= (ENTRIES_PER_NODE + 3) * len(large["mapping"])


def test_a_fork_inside_a_branch_is_a_branch_of_that_branch(backend, api, alice):
    """The branch's own answer was regenerated: that path shares the branch's prefix, so it
    hangs from the branch at the seq where they part, not from the conversation."""
    nodes = [
        _node("root", None, ["q1"]),
        _node("q1", "root", ["a1-old", "a1-new"], "user", "Name a colour"),
        _node("a1-old", "q1", ["q2"], "assistant", "Red"),
        _node("q2", "a1-old", ["a2-first", "a2-second"], "user", "Another?"),
        _node("a2-first", "q2", [], "assistant", "Blue"),
        _node("a2-second", "q2", [], "assistant", "Green"),
        _node("a1-new", "q1", [], "assistant", "Yellow"),
    ]
    answer = _upload(api, _export(conversation(nodes, current_node="a1-new")))

    sessions = {s["source_id"]: s for s in answer.json()["sessions"]}
    main = sessions["conv-1"]
    branch = sessions["conv-1:a2-second"]  # the newest answer: the branch's own path
    inner = sessions["conv-1:a2-first"]
    assert (branch["parent_id"], branch["branched_at_seq"]) == (main["session_id"], 1)
    assert (inner["parent_id"], inner["branched_at_seq"]) == (branch["session_id"], 3)
    store = get_store()
    assert [e.content for e in store.get_messages(inner["session_id"])] == [
        "Name a colour",
        "Red",
        "Another?",
        "Blue",
    ]
    assert _entries_written(alice) == 2 + 4 + 4


def test_a_branch_follows_the_newest_child_as_the_children_list_orders_them(api, alice):
    nodes = [
        _node("root", None, ["q1"]),
        _node("q1", "root", ["a1-new"], "user", "Pick one"),
        _node("a1-new", "q1", [], "assistant", "This"),
        # The file lists the edit first; the parent's children list says it came second.
        _node("q2-edited", "a1-old", [], "user", "Why that?"),
        _node("q2", "a1-old", [], "user", "Why?"),
        _node("a1-old", "q1", ["q2", "q2-edited"], "assistant", "That"),
    ]
    answer = _upload(api, _export(conversation(nodes, current_node="a1-new")))

    sessions = {s["source_id"]: s for s in answer.json()["sessions"]}
    assert set(sessions) == {"conv-1", "conv-1:q2-edited", "conv-1:q2"}
    assert sessions["conv-1:q2"]["parent_id"] == sessions["conv-1:q2-edited"]["session_id"]


def test_a_file_over_the_node_limit_is_refused_before_anything_is_written(api, alice, settings):
    settings.IMPORT_MAX_NODES = 50
    answer = _upload(api, _export(regenerated_conversation(), conversation(chain(60))))
    assert answer.status_code == 413
    assert answer.json()["code"] == "import_too_large"
    assert "IMPORT_MAX_NODES (50)" in answer.json()["detail"]
    assert _sessions(alice) == []


def test_a_path_over_the_depth_limit_is_refused_naming_it(api, alice, settings):
    settings.IMPORT_MAX_DEPTH = 30
    answer = _upload(api, _export(regenerated_conversation(), conversation(chain(40))))
    assert answer.status_code == 413
    assert "conversations[1]" in answer.json()["detail"]
    assert "IMPORT_MAX_DEPTH (30)" in answer.json()["detail"]
    assert _sessions(alice) == []


def test_branches_over_the_branch_limit_are_left_out_and_reported(api, alice, settings):
    settings.IMPORT_MAX_BRANCHES = 3
    answer = _upload(api, _export(branch_heavy(20)))
    body = answer.json()
    assert body["imported"] == 1 + 3
    main = body["sessions"][0]
    assert any(
        note.startswith("16 branch(es) left out") and "IMPORT_MAX_BRANCHES (3" in note
        for note in main["notes"]
    ), main["notes"]


# --- zips ----------------------------------------------------------------------------------


def test_a_zip_bomb_is_refused_while_it_is_read(api, alice, tmp_path):
    bomb = zip_bomb(tmp_path / "export.zip", unpacked_mib=64)
    assert bomb.stat().st_size < 200 * 1024  # a few KiB that unpack to 64 MiB

    answer = _upload(api, bomb.read_bytes(), name="export.zip")

    assert answer.status_code == 413
    assert answer.json()["code"] == "import_too_large"
    assert "times its compressed size" in answer.json()["detail"]
    assert _sessions(alice) == []


def test_a_zip_over_the_unpacked_limit_is_refused_naming_it(api, alice, settings, tmp_path):
    settings.IMPORT_MAX_UNPACKED_BYTES = 64 * 1024
    content = _export(*(conversation(chain(20), conversation_id=f"c{n}") for n in range(40)))
    assert len(content) > 64 * 1024
    archive = stored_zip(tmp_path / "export.zip", content)

    answer = _upload(api, archive.read_bytes(), name="export.zip")

    assert answer.status_code == 413
    assert "IMPORT_MAX_UNPACKED_BYTES (65536 bytes)" in answer.json()["detail"]
    assert _sessions(alice) == []


def test_a_zip_within_the_limits_imports(api, alice, tmp_path):
    archive = stored_zip(tmp_path / "export.zip", _export(regenerated_conversation()))
    answer = _upload(api, archive.read_bytes(), name="export.zip")
    assert answer.status_code == 200 and answer.json()["imported"] == 2


# --- openai-agents databases ------------------------------------------------------------------


def test_an_agents_file_whose_messages_are_a_view_is_refused(api, alice, tmp_path):
    database = agents_database_with_a_view(tmp_path / "agents.db", rows=300_000)
    assert database.stat().st_size < 16 * 1024

    answer = _upload(api, database.read_bytes(), name="agents.db")

    assert answer.status_code == 400
    assert answer.json()["code"] == "not_an_openai_agents_database"
    assert "agent_messages is a view" in answer.json()["detail"]
    assert _sessions(alice) == []


def test_an_agents_file_whose_messages_are_a_virtual_table_is_refused(api, alice, tmp_path):
    database = agents_database_with_a_virtual_table(tmp_path / "agents.db")
    answer = _upload(api, database.read_bytes(), name="agents.db")
    assert answer.status_code == 400
    assert "agent_messages is a virtual table" in answer.json()["detail"]


def test_an_agents_file_over_the_row_limit_is_refused_naming_it(api, alice, settings, tmp_path):
    settings.IMPORT_MAX_NODES = 100
    database = agents_database_with_rows(tmp_path / "agents.db", rows=200)

    answer = _upload(api, database.read_bytes(), name="agents.db")

    assert answer.status_code == 413
    assert "IMPORT_MAX_NODES (100)" in answer.json()["detail"]
    assert _sessions(alice) == []


def test_reading_an_agents_file_stops_at_its_step_budget(api, alice, settings, tmp_path):
    # Six rows (a session, five items) fit IMPORT_MAX_NODES, so the budget is 30,000 steps;
    # looking up two tables in a schema of 6,000 takes more than 50,000.
    settings.IMPORT_MAX_NODES = 6
    database = agents_database_with_a_large_schema(tmp_path / "agents.db", tables=6_000)

    answer = _upload(api, database.read_bytes(), name="agents.db")

    assert answer.status_code == 413
    assert "SQLite steps" in answer.json()["detail"]
    assert _sessions(alice) == []


def test_an_agents_file_is_left_as_it_was(api, alice, tmp_path):
    database = agents_database_with_rows(tmp_path / "agents.db", rows=3)
    before = database.read_bytes()

    report = history_import(owner_id=alice.id, source="openai-agents", path=database)

    assert report.count(imported=True) == 1
    assert database.read_bytes() == before
    assert list(tmp_path.iterdir()) == [database]  # no journal, no write-ahead log left


# --- odd but well-formed JSON ----------------------------------------------------------------


def test_an_array_where_an_object_belongs_is_refused_naming_where(api, alice):
    nodes = [_node("root", None, ["n1"]), _node("n1", "root", [], "user", "hi")]
    nodes[1]["message"]["content"] = ["hi"]
    answer = _upload(api, _export(regenerated_conversation(), conversation(nodes)))
    assert answer.status_code == 400
    assert answer.json()["code"] == "not_a_chatgpt_export"
    assert "conversations[1].mapping['n1'].message.content is an array" in (answer.json()["detail"])
    assert _sessions(alice) == []


def test_a_mapping_that_is_an_array_is_refused_naming_where(api, alice):
    answer = _upload(api, _export({"id": "c1", "mapping": [1, 2]}))
    assert answer.status_code == 400
    assert "conversations[0].mapping is an array, not an object" in answer.json()["detail"]


def test_dates_written_as_text_import(api, alice):
    exported = regenerated_conversation()
    exported["create_time"] = "2024-05-01T10:00:00Z"
    del exported["current_node"]
    for node in exported["mapping"].values():
        if node["message"]:
            node["message"]["create_time"] = "2024-05-01T10:00:00.5+00:00"
    exported["mapping"]["a2"]["message"]["create_time"] = "2024-05-01T10:05:00Z"

    answer = _upload(api, _export(exported))

    assert answer.status_code == 200, answer.json()
    assert answer.json()["imported"] == 2
    (row,) = ImportedSession.objects.filter(source_id=exported["conversation_id"])
    assert row.source_created_at.isoformat() == "2024-05-01T10:00:00+00:00"


def test_json_nested_a_hundred_thousand_deep_is_refused(api, alice):
    answer = _upload(api, b"[" * 100_000 + b"]" * 100_000)
    assert answer.status_code == 400
    assert answer.json()["code"] == "not_a_chatgpt_export"
    assert "nests deeper" in answer.json()["detail"]


def test_nul_in_a_title_and_a_message_is_dropped_and_reported(backend, api, alice):
    exported = regenerated_conversation()
    exported["title"] = "Capi\x00tals"
    exported["mapping"]["a2"]["message"]["content"]["parts"] = ["Ber\x00lin."]

    answer = _upload(api, _export(exported))

    assert answer.status_code == 200, answer.json()
    main = next(s for s in answer.json()["sessions"] if s["parent_id"] is None)
    assert "2 NUL or lone surrogate character(s) dropped" in main["notes"]
    meta = get_store().get_meta(main["session_id"])
    assert meta.title == "Capitals"
    assert get_store().get_messages(main["session_id"])[-1].content == "Berlin."


def test_ids_over_two_hundred_characters_import_and_import_once(api, alice):
    exported = regenerated_conversation()
    exported["conversation_id"] = exported["id"] = "c" * 300
    exported["mapping"]["a1-old"]["message"]["recipient"] = "browser"  # a call, its id long
    exported["mapping"]["a1-old"]["id"] = "a" * 300

    first = _upload(api, _export(exported))
    again = _upload(api, _export(exported))

    assert first.status_code == 200, first.json()
    assert first.json()["imported"] == 2
    assert (again.json()["imported"], again.json()["unchanged"]) == (0, 2)
    assert len(_sessions(alice)) == 2


def test_a_duplicate_conversation_id_in_one_file_is_reported(api, alice):
    first = regenerated_conversation()
    second = regenerated_conversation()
    second["title"] = "Capitals, again"

    answer = _upload(api, _export(first, second))

    body = answer.json()
    assert [s["source_id"] for s in body["sessions"]].count(first["conversation_id"]) == 2
    refused = body["sessions"][-1]
    assert refused["imported"] is False and refused["session_id"] is None
    assert "conversations[1] has the same id as conversations[0]" in refused["error"]
    assert body["failed"] == 1


def test_a_conversation_of_five_thousand_messages_imports_whole(backend, api, alice):
    answer = _upload(api, _export(conversation(chain(5_000), current_node="m4999")))

    assert answer.status_code == 200, answer.json()
    (meta,) = _sessions(alice)
    assert meta.last_seq == 5_000
    messages = get_store().get_messages(meta.id)
    assert (messages[0].content, messages[-1].content) == ("message 0", "message 4999")
