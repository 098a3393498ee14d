"""`/cleanup stm` (docs/design.md §29): it lists and removes only the working memory that no
longer belongs to a live session. What the person told Jarvis to remember in an existing
conversation is never touched."""

from io import StringIO

import pytest
from django.core.management import call_command

from memory_app.models import WorkingMemory
from memory_app.services import working_memory_recall
from sessions_app.runtime.turn.turns import turn_run
from sessions_app.store import get_store
from sessions_app.web.commands import command_run

pytestmark = pytest.mark.django_db(transaction=True)


def chat(user, session_id: str, text: str) -> None:
    get_store().create(session_id, owner_id=user.id)
    turn_run(session_id=session_id, text=text)


def gone_without_its_purge(session_id: str) -> None:
    """The session is gone but its working memory is still there: what a worker that died
    between the two, or a sub-agent whose session went with it, leaves behind."""
    assert get_store().delete(session_id)


def run(user, line: str, session_id: str = "locker"):
    return command_run(session_id=session_id, owner_id=user.id, line=line)


def test_cleanup_stm_confirm_keeps_live_working_memory_and_removes_a_gone_session_s(
    backend, alice, bob
):
    chat(alice, "locker", "remember that my locker code is 4411")
    chat(alice, "old-trip", "remember that my seat is 12A")
    gone_without_its_purge("old-trip")
    chat(bob, "bobs-gone", "remember that my pin is 7")
    gone_without_its_purge("bobs-gone")
    remembered = working_memory_recall(session_id="locker")
    assert "4411" in str(remembered)

    listing = run(alice, "/cleanup stm")
    assert listing.data["would_remove"] == {"stm": 1}
    assert "old-trip" in listing.text
    assert "locker" not in listing.text.split("stm:")[1] and "bobs-gone" not in listing.text

    result = run(alice, "/cleanup stm confirm")

    assert result.data["removed"] == ["old-trip"]
    assert working_memory_recall(session_id="locker") == remembered
    assert not WorkingMemory.objects.filter(session_id="old-trip").exists()
    assert WorkingMemory.objects.filter(session_id="bobs-gone").exists(), "only the caller's own"
    assert run(alice, "/cleanup").data["would_remove"]["stm"] == 0

    # The operator's cleanup takes every person's leftovers, and still no live session's.
    out = StringIO()
    call_command("cleanup_sessions", "stm", "confirm", "--all-users", stdout=out)
    assert not WorkingMemory.objects.filter(session_id="bobs-gone").exists()
    assert working_memory_recall(session_id="locker") == remembered


def test_a_leftover_under_an_id_another_person_now_uses_goes_and_theirs_stays(alice, bob):
    chat(alice, "shared-name", "remember that my locker code is 4411")
    gone_without_its_purge("shared-name")
    chat(bob, "shared-name", "remember that my color is blue")
    get_store().create("chat", owner_id=alice.id)

    result = run(alice, "/cleanup stm confirm", session_id="chat")

    assert result.data["removed"] == ["shared-name"]
    assert list(WorkingMemory.objects.values_list("owner_id", flat=True)) == [bob.id]
    assert "blue" in str(working_memory_recall(session_id="shared-name"))
