"""`manage.py list_sessions`, `cleanup_sessions` and the slash commands of `manage.py chat`."""

import pytest
from django.core.management import CommandError, call_command

from sessions_app.runtime.turn.turns import turn_run
from sessions_app.store import get_store
from tests.helpers import run_chat

pytestmark = pytest.mark.django_db(transaction=True)


def test_list_sessions_shows_a_users_sessions_as_the_chat_does(backend, alice, bob, capsys):
    get_store().create("taxes", owner_id=alice.id, title="Taxes")
    get_store().create("test-probe", owner_id=alice.id)
    get_store().create("bobs", owner_id=bob.id)
    turn_run(session_id="taxes", text="ask researcher to compute 6*7")

    call_command("list_sessions", "--user", "alice")
    out = capsys.readouterr().out
    assert "taxes “Taxes”" in out and "test-probe" in out
    assert "bobs" not in out and "agent_researcher" not in out

    call_command("list_sessions", "--user", "alice", "--include-subagents", "--no-tests")
    out = capsys.readouterr().out
    assert "agent_researcher__taxes" in out and "⤷ researcher for taxes" in out
    assert "test-probe" not in out

    with pytest.raises(CommandError, match="no user named 'carol'"):
        call_command("list_sessions", "--user", "carol")


def test_cleanup_sessions_lists_then_removes_with_progress(backend, alice, bob, capsys):
    get_store().create("chat", owner_id=alice.id)
    get_store().create("test-a", owner_id=alice.id)
    get_store().create("test-b", owner_id=alice.id)
    get_store().create("test-bob", owner_id=bob.id)

    call_command("cleanup_sessions", "--user", "alice")
    listing = capsys.readouterr().out
    assert "tests: 2 test session(s)" in listing
    assert "manage.py cleanup_sessions <agents|tests|stm|connections> confirm" in listing
    call_command("cleanup_sessions", "tests", "--user", "alice")
    assert "nothing removed" in capsys.readouterr().out
    assert get_store().get_meta("test-a") is not None

    call_command("cleanup_sessions", "tests", "confirm", "--user", "alice")
    out = capsys.readouterr().out
    assert "[1/2]" in out and "[2/2]" in out and "deleted with its memory" in out
    assert "cleanup tests: removed 2" in out
    assert get_store().get_meta("test-bob") is not None, "a user cleans only their own"

    call_command("cleanup_sessions", "tests", "confirm", "--all-users")
    assert "cleanup tests: removed 1" in capsys.readouterr().out
    assert [meta.id for meta in get_store().list()] == ["chat"]


def test_cleanup_sessions_needs_to_know_whose_sessions(alice):
    with pytest.raises(CommandError, match="--user --all-users"):
        call_command("cleanup_sessions", "tests", "confirm")
    with pytest.raises(CommandError, match="no user named 'carol'"):
        call_command("cleanup_sessions", "--user", "carol")


def test_chat_takes_every_slash_command(alice):
    lines = (
        "what is 2+3\n/cost\n/model\n/model anthropic:\n/model offline\n/sessions\n"
        "/branch\nwhat did I say\n/nonsense\n/quit\n"
    )
    completed = run_chat("test-cli", "--user", "alice", lines=lines, JARVIS_MODEL="offline")
    assert completed.returncode == 0, completed.stderr
    out, err = completed.stdout, completed.stderr
    assert "2+3 = 5." in out
    assert "total:" in out and "“/cost”" not in out, "a command is not sent as a message"
    assert "model: offline (the default)" in out
    assert "[bad_model]" in err and "[unknown_command]" in err
    assert "model: offline from the next turn on" in out
    assert "▶ test-cli" in out
    copy_id = out.split("[now in ")[1].split("]")[0]
    assert "You said: “what is 2+3”" in out, "the copy continues the conversation"
    copied = get_store().get_messages(copy_id)
    assert [e.content for e in copied if e.role == "user"] == ["what is 2+3", "what did I say"]
    assert get_store().get_meta(copy_id).parent_id == "test-cli"
