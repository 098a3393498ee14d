"""Slash commands as the chat runs them: /branch <id>, /model, /sessions [all], /cleanup."""

from datetime import timedelta

import pytest
from django.utils import timezone

from memory_app.models import Episode, WorkingMemory
from memory_app.services import working_memory_remember
from sessions_app.runtime.turn.turns import turn_run
from sessions_app.services import cleanup, connections, deletion
from sessions_app.store import get_store
from sessions_app.web.commands import CommandError, command_run

pytestmark = pytest.mark.django_db(transaction=True)


def run(user, line, session_id="chat-1"):
    return command_run(session_id=session_id, owner_id=user.id, line=line)


def session(user, session_id, **kwargs):
    return get_store().create(session_id, owner_id=user.id, **kwargs).id


def test_branch_names_the_session_to_copy_and_switches_to_a_new_id(backend, alice, bob):
    session(alice, "chat-1")
    session(alice, "taxes-2025")
    turn_run(session_id="taxes-2025", text="what is 2+3")

    result = run(alice, "/branch taxes-2025")
    copy = result.data["session"]
    assert result.data["switch_to"] == copy["id"] not in {"taxes-2025", "chat-1"}
    assert copy["parent_id"] == "taxes-2025" and copy["branched_at_seq"] == 6
    assert len(get_store().get_messages(copy["id"])) == 6

    own = run(alice, "/branch")
    assert own.data["session"]["parent_id"] == "chat-1"

    session(bob, "bobs")
    with pytest.raises(CommandError) as refused:
        run(alice, "/branch bobs")
    assert refused.value.code == "not_found"
    with pytest.raises(CommandError) as refused:
        run(alice, "/branch a b")
    assert refused.value.code == "bad_request"


def test_model_shows_and_sets_the_sessions_model(backend, alice, settings):
    settings.JARVIS_MODEL = "offline"
    session(alice, "chat-1")
    assert run(alice, "/model").text == "model: offline (the default)"

    changed = run(alice, "/model anthropic:claude-haiku-4-5")
    assert changed.data["model"] == "anthropic:claude-haiku-4-5"
    assert run(alice, "/model").text == "model: anthropic:claude-haiku-4-5 (set for this session)"
    (entry,) = get_store().get_messages("chat-1")
    assert (entry.kind, entry.data) == (
        "model_change",
        {"from": "offline", "to": "anthropic:claude-haiku-4-5"},
    )
    with pytest.raises(CommandError) as refused:
        run(alice, "/model gpt-4o")
    assert refused.value.code == "bad_model"
    assert len(get_store().get_messages("chat-1")) == 1


def test_sessions_hides_sub_agents_unless_all(backend, alice):
    session(alice, "chat-1")
    turn_run(session_id="chat-1", text="ask researcher to compute 6*7")
    assert [row["id"] for row in run(alice, "/sessions").data["sessions"]] == ["chat-1"]
    everything = run(alice, "/sessions all")
    assert {row["id"] for row in everything.data["sessions"]} == {
        "chat-1",
        "agent_researcher__chat-1",
    }
    assert "⤷ researcher for chat-1" in everything.text


def orphans_and_tests(alice, bob):
    """Alice: a conversation, sub-agents of a deleted one, test sessions with memory; Bob: his."""
    session(alice, "chat-1")
    session(alice, "agent_researcher__gone", agent="researcher", spawned_by="gone")
    session(alice, "agent_scratch__task_0f", agent="scratch", spawned_by="gone")
    session(alice, f"agent_librarian:{alice.id}", agent="librarian", spawned_by="gone")
    session(alice, "test-one")
    session(alice, "live-two")
    turn_run(session_id="test-one", text="remember that my pin is 1")
    session(bob, "test-bobs")
    working_memory_remember(session_id="chat-1", key="color", value="blue")


def test_cleanup_lists_first_and_removes_only_what_is_confirmed(backend, alice, bob):
    orphans_and_tests(alice, bob)

    listing = run(alice, "/cleanup")
    # Working memory of live sessions (chat-1's, test-one's) is nobody's leftover.
    assert listing.data["would_remove"] == {"agents": 2, "tests": 2, "stm": 0, "connections": 0}
    assert "agent_researcher__gone" in listing.text and "test-one" in listing.text
    assert f"agent_librarian:{alice.id}" not in listing.text, "per_agent sessions are kept"
    unconfirmed = run(alice, "/cleanup tests")
    assert "nothing removed" in unconfirmed.text
    assert get_store().get_meta("test-one") is not None

    tests = run(alice, "/cleanup tests confirm")
    assert sorted(tests.data["removed"]) == ["live-two", "test-one"]
    assert "[1/2]" in tests.text and "[2/2]" in tests.text
    assert get_store().get_meta("test-one") is None
    assert not Episode.objects.filter(session_id="test-one").exists()
    assert get_store().get_meta("test-bobs") is not None, "only the caller's own sessions"

    agents = run(alice, "/cleanup agents confirm")
    assert sorted(agents.data["removed"]) == ["agent_researcher__gone", "agent_scratch__task_0f"]
    assert get_store().get_meta(f"agent_librarian:{alice.id}") is not None

    stm = run(alice, "/cleanup stm confirm")
    assert stm.data["removed"] == []
    assert list(WorkingMemory.objects.values_list("session_id", "key")) == [("chat-1", "color")]

    assert run(alice, "/cleanup").data["would_remove"] == {
        "agents": 0,
        "tests": 0,
        "stm": 0,
        "connections": 0,
    }
    with pytest.raises(CommandError) as refused:
        run(alice, "/cleanup everything confirm")
    assert refused.value.code == "bad_request"


def test_cleanup_skips_a_session_open_in_a_tab(backend, alice):
    session(alice, "chat-1")
    session(alice, "test-open")
    connections.connection_open(session_id="test-open", channel_name="tab", user_id=alice.id)
    result = run(alice, "/cleanup tests confirm")
    assert result.data["removed"] == []
    assert result.data["skipped"] == [["test-open", "open in a browser tab"]]
    assert get_store().get_meta("test-open") is not None


def test_idle_sub_agent_sessions_are_cleaned_up_even_with_their_parent_alive(backend, alice):
    session(alice, "chat-1")
    turn_run(session_id="chat-1", text="ask researcher to compute 6*7")
    assert cleanup.cleanup_plan(owner_id=alice.id).agents == []
    later = timezone.now() + timedelta(days=8)
    idle = cleanup.cleanup_plan(owner_id=alice.id, now=later).agents
    assert [meta.id for meta in idle] == ["agent_researcher__chat-1"]


def test_a_cleanup_cut_short_is_finished_by_the_next_run(backend, alice, monkeypatch):
    session(alice, "chat-1")
    for name in ("test-a", "test-b", "test-c"):
        session(alice, name)
        turn_run(session_id=name, text="remember that my pin is 1")
    real_delete = deletion.session_delete
    calls = []

    def crash_on_the_second(**kwargs):
        calls.append(kwargs["session_id"])
        if len(calls) == 2:
            raise SystemExit("the process was killed")
        return real_delete(**kwargs)

    monkeypatch.setattr(deletion, "session_delete", crash_on_the_second)
    with pytest.raises(SystemExit):
        run(alice, "/cleanup tests confirm")
    monkeypatch.setattr(deletion, "session_delete", real_delete)
    gone, interrupted = calls
    assert get_store().get_meta(gone) is None
    assert Episode.objects.filter(session_id=interrupted).exists(), "untouched, memory and all"

    rerun = run(alice, "/cleanup tests confirm")
    assert sorted(rerun.data["removed"]) == sorted({"test-a", "test-b", "test-c"} - {gone})
    assert "[2/2]" in rerun.text
    assert not Episode.objects.exists()
