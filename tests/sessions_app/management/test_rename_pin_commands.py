"""`/rename` and `/pin` (docs/design.md §24), the same in the terminal's `manage.py chat` and
on the chat page's socket: the sessions list shows the new name, pinned first."""

import pytest

from sessions_app.store import get_store
from sessions_app.web.commands import CommandError, command_run
from tests.builders import token_client
from tests.helpers import run_chat

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_terminal_renames_and_pins_its_session(alice):
    get_store().create("older", owner_id=alice.id, title="Older")
    lines = "hello\n/rename Road trip to Porto\n/pin\n/sessions\n/quit\n"
    completed = run_chat("cli-trip", "--user", "alice", lines=lines, JARVIS_MODEL="offline")
    assert completed.returncode == 0, completed.stderr
    assert "renamed: Road trip to Porto" in completed.stdout
    assert "pinned: listed first" in completed.stdout
    listed = token_client(alice).get("/api/sessions/").json()
    assert [(s["id"], s["title"], s["pinned"]) for s in listed] == [
        ("cli-trip", "Road trip to Porto", True),
        ("older", "Older", False),
    ]


def test_bad_uses_are_refused_and_change_nothing(backend, alice):
    get_store().create("s1", owner_id=alice.id, title="Kept")
    for line, code in (("/rename", "bad_request"), ("/rename " + "x" * 201, "invalid")):
        with pytest.raises(CommandError) as refused:
            command_run(session_id="s1", owner_id=alice.id, line=line)
        assert refused.value.code == code
    with pytest.raises(CommandError):
        command_run(session_id="s1", owner_id=alice.id, line="/pin maybe")
    meta = get_store().get_meta("s1")
    assert (meta.title, meta.pinned) == ("Kept", False)
    done = command_run(session_id="s1", owner_id=alice.id, line="/pin")
    assert done.data["session"]["pinned"] is True
    undone = command_run(session_id="s1", owner_id=alice.id, line="/pin off")
    assert undone.data["session"]["pinned"] is False
