"""Deleting a session takes its memory along — and nothing else (docs/design.md §9)."""

import pytest

from memory_app.models import (
    CompactionSummary,
    Episode,
    Procedure,
    ProfileFact,
    ThoughtLog,
    WorkingMemory,
)
from memory_app.services import memory_consolidate, working_memory_remember
from sessions_app.core import signals
from sessions_app.services.compaction import compaction_append
from tests.builders import arithmetic_turn, play_turn

pytestmark = pytest.mark.django_db


def session_memory(session_id) -> dict[str, int]:
    return {
        "episodes": Episode.objects.filter(session_id=session_id).count(),
        "thought_logs": ThoughtLog.objects.filter(session_id=session_id).count(),
        "working_memory": WorkingMemory.objects.filter(session_id=session_id).count(),
        "compaction_summaries": CompactionSummary.objects.filter(session_id=session_id).count(),
    }


def fill(session_id, owner_id):
    """A session with every kind of memory: episodes, thoughts, scratchpad, a compaction."""
    play_turn(session_id, "My name is Dana", "Hi Dana.", owner_id=owner_id)
    for expression in ("1+1", "2+2", "3+3"):
        arithmetic_turn(session_id, expression, "x", owner_id=owner_id)
    working_memory_remember(session_id=session_id, key="locker", value="4711")
    compaction_append(session_id=session_id)
    memory_consolidate(session_id=session_id)


def test_the_deleted_session_memory_goes_and_everything_else_stays(backend, alice):
    fill("s-doomed", alice.id)
    fill("s-kept", alice.id)
    assert session_memory("s-doomed") == {
        "episodes": 4,
        "thought_logs": 6,
        "working_memory": 1,
        "compaction_summaries": 1,
    }
    kept_before = session_memory("s-kept")
    facts = list(ProfileFact.objects.values_list("key", "text", "source_session_id"))
    procedures = list(Procedure.objects.values_list("id", "task_kind", "status"))
    assert facts and procedures

    signals.session_deleted.send(sender=None, session_id="s-doomed", owner_id=alice.id)

    assert session_memory("s-doomed") == dict.fromkeys(kept_before, 0)
    assert session_memory("s-kept") == kept_before
    # What the user taught belongs to the user: facts and procedures outlive the session.
    assert list(ProfileFact.objects.values_list("key", "text", "source_session_id")) == facts
    assert list(Procedure.objects.values_list("id", "task_kind", "status")) == procedures


def test_a_failing_purge_reaches_the_sender(monkeypatch, alice):
    """The receiver runs inside the delete's transaction; its failure must abort the delete."""
    fill("s-fail", alice.id)

    def broken(*, session_id):
        raise RuntimeError("memory store unavailable")

    monkeypatch.setattr("memory_app.receivers.memory_purge_for_session", broken)
    with pytest.raises(RuntimeError, match="memory store unavailable"):
        signals.session_deleted.send(sender=None, session_id="s-fail", owner_id=alice.id)
    assert session_memory("s-fail")["episodes"] == 4
