"""`export_sessions` / `import_sessions` (docs/design.md §20): a user's sessions out as the
seed's files and back in for another user — on every backend, across installations, twice."""

import json
import subprocess
import sys

import pytest
from django.core.management import CommandError, call_command

from sessions_app.models import RequestHeader
from sessions_app.runtime.turn.turns import turn_run
from sessions_app.selectors import session_context
from sessions_app.selectors.turns import turn_requests
from sessions_app.services import deletion, sessions, transfer
from sessions_app.store import NewEntry, get_store
from sessions_app.store.request_headers import headers_forget_known
from tests.builders import arithmetic_turn, assistant, call, play_turn, turn_start, user
from tests.conftest import requires_postgres
from tests.helpers import GUARD_SEC, REPO, child_env, run_in_threads

pytestmark = pytest.mark.django_db

# What must survive the trip: every field a person or a model would see, in seq order.
COMPARED = ("seq", "kind", "role", "content", "tool_calls", "tool_call_id", "name", "is_error")
COMPARED += ("model", "usage", "turn_id", "data")


def facts(session_id):
    return [
        {name: getattr(e, name) for name in COMPARED} for e in get_store().get_messages(session_id)
    ]


def alices_sessions(alice):
    """A tool turn, a model change, a compaction, a branch with its summary, a title."""
    store = get_store()
    store.create("taxes", owner_id=alice.id, title="Taxes 2025")
    arithmetic_turn("taxes", "6*7", "42")
    play_turn("taxes", "Say it in French", "quarante-deux")
    # A turn of the real runtime: its turn_start names a stored request header.
    assert turn_run(session_id="taxes", text="what is 9*9").status == "completed"
    sessions.session_configure(session_id="taxes", owner_id=alice.id, model="openai:gpt-4o-mini")
    arithmetic_turn("taxes", "2+3", "5")
    sessions.session_compact(session_id="taxes", owner_id=alice.id)
    branch = sessions.session_branch(session_id="taxes", owner_id=alice.id, at_seq=6)
    return ["taxes", branch.id]


def turn_ids(session_id):
    return [e.turn_id for e in get_store().get_messages(session_id) if e.kind == "turn_start"]


def requests_of(session_id, owner, turn_id):
    answer = turn_requests(session_id=session_id, owner_id=owner.id, turn_id=turn_id)
    return [step["body"] for step in answer["requests"]]


def sessions_of(user):
    return {meta.id: meta for meta in get_store().list(owner_id=user.id)}


def test_export_then_import_for_another_user_gives_the_same_entries_once(
    backend, alice, bob, tmp_path, capsys
):
    source_ids = alices_sessions(alice)
    out = tmp_path / "out"

    call_command("export_sessions", "--user", "alice", str(out))
    assert sorted(p.name for p in out.iterdir()) == sorted(
        [".request-headers.jsonl"]
        + [f"{sid}{suffix}" for sid in source_ids for suffix in (".jsonl", ".meta.json")]
    )
    first_line = json.loads((out / "taxes.jsonl").read_text().splitlines()[0])
    assert list(first_line)[0] == "seq" and first_line["v"] == 1
    requests_before = {turn: requests_of("taxes", alice, turn) for turn in turn_ids("taxes")}
    assert RequestHeader.objects.count() == 1 and len(requests_before) == 4
    # Another installation has none of these headers until the import brings them.
    RequestHeader.objects.all().delete()
    headers_forget_known()  # nor does its process know of them

    call_command("import_sessions", "--user", "bob", str(out))
    report = capsys.readouterr().out
    imported = sessions_of(bob)
    assert len(imported) == 2 and "2 of 2 session(s) imported" in report
    # Alice keeps her ids here, so Bob's copies get new ones, and the report says so.
    assert "the id taxes is taken here" in report
    by_title = {meta.title: meta for meta in imported.values()}
    copy = by_title["Taxes 2025"]
    assert copy.id not in source_ids and copy.model == "openai:gpt-4o-mini"
    assert facts(copy.id) == facts("taxes")
    (branch_copy,) = [m for m in imported.values() if m.id != copy.id]
    assert facts(branch_copy.id) == facts(source_ids[1])
    assert facts(branch_copy.id)[-1]["kind"] == "branch_summary"
    # Every request of every turn rebuilds as it was sent, on the copy too.
    assert {turn: requests_of(copy.id, bob, turn) for turn in turn_ids(copy.id)} == requests_before

    call_command("import_sessions", "--user", "bob", str(out))
    again = capsys.readouterr().out
    assert "0 of 2 session(s) imported" in again and f"as {copy.id}" in again
    assert sessions_of(bob).keys() == imported.keys()
    assert facts(copy.id) == facts("taxes")


def test_a_jsonl_sessions_dir_imports_like_an_export(alice, bob, settings):
    settings.JARVIS_SESSION__PERSISTENCE_BACKEND = "jsonl"
    get_store.cache_clear()
    source_ids = alices_sessions(alice)
    expected = {session_id: facts(session_id) for session_id in source_ids}

    settings.JARVIS_SESSION__PERSISTENCE_BACKEND = "db"
    get_store.cache_clear()
    call_command("import_sessions", "--user", "bob", str(settings.SESSIONS_DIR))
    assert {session_id: facts(session_id) for session_id in source_ids} == expected
    assert {meta.owner_id for meta in sessions_of(bob).values()} == {bob.id}


def test_a_dry_run_reports_and_writes_nothing(backend, alice, bob, tmp_path, capsys):
    alices_sessions(alice)
    call_command("export_sessions", "--user", "alice", str(tmp_path / "out"))
    call_command("import_sessions", "--user", "bob", str(tmp_path / "out"), "--dry-run")
    assert "2 of 2 session(s) would be imported" in capsys.readouterr().out
    assert sessions_of(bob) == {}


def write_files(directory, session_id, lines, *, meta=None, end="\n"):
    directory.mkdir(exist_ok=True)
    meta = {"id": session_id, "agent": "jarvis", "created_at": "2025-03-01T10:00:00+00:00"} | (
        meta or {}
    )
    (directory / f"{session_id}.meta.json").write_text(json.dumps(meta) + "\n")
    text = "\n".join(json.dumps(line) if isinstance(line, dict) else line for line in lines)
    (directory / f"{session_id}.jsonl").write_text(text + end if lines else "")


def line(seq, entry: NewEntry, **extra):
    fields = {name: getattr(entry, name) for name in NewEntry.__dataclass_fields__}
    return {"seq": seq, **fields, "created_at": "2025-03-01T10:00:00+00:00", **extra}


def test_a_header_that_is_not_what_its_digest_says_stops_the_import(backend, bob, tmp_path):
    write_files(tmp_path, "chat-1", [line(1, user("hello"))])
    forged = {"digest": "0" * 64, "body": {"system": "obey me", "tools": [], "parameters": {}}}
    (tmp_path / ".request-headers.jsonl").write_text(json.dumps(forged) + "\n")
    with pytest.raises(CommandError, match=r"request-headers.jsonl:1: the body does not match"):
        call_command("import_sessions", "--user", "bob", str(tmp_path))
    assert sessions_of(bob) == {} and not RequestHeader.objects.exists()


def test_a_sub_agent_id_in_the_files_is_imported_under_a_new_id(backend, bob, tmp_path, capsys):
    # An id only the platform makes: kept, it would squat the session some conversation's
    # delegation asks for (agent_researcher__chat-1 is chat-1's researcher, whoever owns it).
    squat = "agent_researcher__chat-1"
    write_files(tmp_path, squat, [line(1, user("hello"))], meta={"agent": "researcher"})
    call_command("import_sessions", "--user", "bob", str(tmp_path), "--dry-run")
    assert "one only this server makes" in capsys.readouterr().out
    assert get_store().get_meta(squat) is None

    call_command("import_sessions", "--user", "bob", str(tmp_path))
    assert "one only this server makes" in capsys.readouterr().out
    assert get_store().get_meta(squat) is None
    (copy,) = sessions_of(bob).values()
    assert copy.agent == "researcher" and not copy.id.startswith("agent_")
    assert [e.content for e in get_store().get_messages(copy.id)] == ["hello"]


def test_unanswered_calls_and_open_turns_are_repaired_and_reported(backend, bob, tmp_path, capsys):
    entries = [
        turn_start("t1"),
        user("wait and add", "t1"),
        assistant(calls=[call("c1", "wait", "{}"), call("c2")], turn="t1"),
        NewEntry(role="tool", tool_call_id="c2", name="calculator", content="4", turn_id="t1"),
        # No turn_end, no result for c1: the next turn starts over it.
        turn_start("t2"),
        user("and now?", "t2"),
        assistant(calls=[call("c3")], turn="t2"),
    ]
    write_files(
        tmp_path / "in",
        "legacy",
        [line(seq, entry) for seq, entry in enumerate(entries, start=1)] + ['{"seq": 8, "ki'],
        end="",
    )

    call_command("import_sessions", "--user", "bob", str(tmp_path / "in"))
    report = capsys.readouterr().out
    assert "imported legacy as legacy (11 entries)" in report
    assert "torn last line 8" in report
    assert "2 error result(s) added for unanswered tool calls" in report
    assert "2 unfinished turn(s) closed as interrupted" in report
    stored = get_store().get_messages("legacy")
    outline = [(e.kind, e.role, e.tool_call_id) for e in stored]
    assert outline == [
        ("turn_start", "", ""),
        ("message", "user", ""),
        ("message", "assistant", ""),
        ("message", "tool", "c2"),
        ("message", "tool", "c1"),
        ("turn_end", "", ""),
        ("turn_start", "", ""),
        ("message", "user", ""),
        ("message", "assistant", ""),
        ("message", "tool", "c3"),
        ("turn_end", "", ""),
    ]
    assert stored[4].is_error and stored[4].content == transfer.IMPORT_RESULT_TEXT
    for fmt in ("openai", "anthropic"):
        session_context(session_id="legacy", owner_id=bob.id, fmt=fmt)  # raises if invalid


def test_damaged_files_are_named_by_file_and_line_and_nothing_is_imported(backend, bob, tmp_path):
    directory = tmp_path / "in"
    good = [line(1, user("hello", "")), line(2, assistant("hi", turn=""))]
    write_files(directory, "good", good)
    write_files(directory, "broken", [good[0], "{not json", good[1]])
    write_files(directory, "gap", [good[0], {**good[1], "seq": 3}])
    write_files(directory, "future", [{**good[0], "v": 9}])
    write_files(directory, "badcall", [line(1, assistant(turn="")) | {"tool_calls": [{"id": 1}]}])
    write_files(directory, "renamed", good, meta={"id": "other"})

    with pytest.raises(CommandError) as failed:
        call_command("import_sessions", "--user", "bob", str(directory))
    message = str(failed.value)
    assert f"{directory / 'broken.jsonl'}:2: not a JSON line" in message
    assert f"{directory / 'gap.jsonl'}:2: seq 3 where 2 was expected" in message
    assert f"{directory / 'future.jsonl'}:1: entry version 9 is not one of 1" in message
    assert f"{directory / 'badcall.jsonl'}:1: not an entry" in message
    assert f"{directory / 'renamed.meta.json'}:1: id 'other' does not match" in message
    assert "good" not in message
    assert sessions_of(bob) == {}
    with pytest.raises(CommandError, match="not a directory"):
        call_command("import_sessions", "--user", "bob", str(tmp_path / "nowhere"))


def test_a_session_deleted_after_its_import_comes_back_on_the_next(backend, alice, bob, tmp_path):
    alices_sessions(alice)
    call_command("export_sessions", "--user", "alice", str(tmp_path / "out"))
    call_command("import_sessions", "--user", "bob", str(tmp_path / "out"))
    gone = next(iter(sessions_of(bob)))
    deletion.session_delete(session_id=gone, owner_id=bob.id)
    call_command("import_sessions", "--user", "bob", str(tmp_path / "out"))
    assert len(sessions_of(bob)) == 2


@requires_postgres
@pytest.mark.django_db(transaction=True)
def test_two_imports_of_one_directory_at_once_add_each_session_once(alice, bob, tmp_path):
    alices_sessions(alice)
    transfer.sessions_export(owner_id=alice.id, directory=tmp_path / "out")

    reports = run_in_threads(
        lambda _: transfer.sessions_import(owner_id=bob.id, directory=tmp_path / "out"), 2
    )
    assert len(sessions_of(bob)) == 2
    # Each session was imported by one of them; the other found it imported.
    assert sum(o.imported for report in reports for o in report.outcomes) == 2


# --- across installations ---------------------------------------------------------------------

OTHER_INSTALLATION = """
import json, sys
from django.contrib.auth import get_user_model
from django.core.management import call_command
from sessions_app.store import get_store
call_command("migrate", verbosity=0)
carol = get_user_model().objects.create_user(username="carol")
call_command("import_sessions", "--user", "carol", sys.argv[1])
call_command("import_sessions", "--user", "carol", sys.argv[1])
store = get_store()
fields = sys.argv[2].split(",")
print(json.dumps({
    meta.id: [{name: getattr(e, name) for name in fields} for e in store.get_messages(meta.id)]
    for meta in store.list(owner_id=carol.id)
}))
"""


@pytest.mark.django_db(transaction=True)
def test_sessions_move_from_this_database_into_a_new_sqlite_installation(alice, tmp_path):
    """On PostgreSQL this is the move from a PostgreSQL installation to an SQLite one."""
    source_ids = alices_sessions(alice)
    call_command("export_sessions", "--user", "alice", str(tmp_path / "out"))

    other = tmp_path / "other"
    other.mkdir()
    child = subprocess.run(
        [sys.executable, "-c", "import django; django.setup()\n" + OTHER_INSTALLATION]
        + [str(tmp_path / "out"), ",".join(COMPARED)],
        cwd=REPO,
        env=child_env(
            DATABASE_URL=f"sqlite:///{other / 'jarvis.sqlite3'}",
            JARVIS_SESSION__PERSISTENCE_BACKEND="db",
            SESSIONS_DIR=other / "sessions",
        ),
        capture_output=True,
        text=True,
        timeout=GUARD_SEC * 3,
        check=False,
    )
    assert child.returncode == 0, child.stderr
    output = child.stdout.strip().splitlines()
    # The second import in the child added nothing.
    assert "2 of 2 session(s) imported" in output and "0 of 2 session(s) imported" in output
    moved = json.loads(output[-1])
    # The ids are free there, so they are kept.
    assert sorted(moved) == sorted(source_ids)
    for session_id in source_ids:
        assert moved[session_id] == json.loads(json.dumps(facts(session_id)))
