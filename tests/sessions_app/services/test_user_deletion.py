"""Deleting an account takes the user's sessions and all their memory along, on both backends."""

import pytest
from django.contrib.auth import get_user_model

from memory_app.models import Episode, ProfileFact, ThoughtLog, WorkingMemory
from memory_app.services import memory_consolidate
from sessions_app.runtime.turn.turns import turn_run
from sessions_app.services import connections, sessions
from sessions_app.store import get_store

pytestmark = pytest.mark.django_db


def test_deleting_a_user_removes_their_sessions_and_memory_only(backend, alice, bob):
    for owner, session_id in ((alice, "alice-1"), (alice, "alice-2"), (bob, "bob-1")):
        sessions.session_create(session_id=session_id, owner_id=owner.id)
        turn_run(session_id=session_id, text="My name is Sam. remember that my locker code is 4411")
        memory_consolidate(session_id=session_id)
    connections.connection_open(session_id="alice-1", channel_name="tab-1", user_id=alice.id)
    assert ProfileFact.objects.filter(owner=alice).exists()
    bob_memory = (
        Episode.objects.filter(session_id="bob-1").count(),
        WorkingMemory.objects.filter(session_id="bob-1").count(),
    )

    get_user_model().objects.get(pk=alice.pk).delete()

    store = get_store()
    assert [meta.id for meta in store.list()] == ["bob-1"]
    assert store.get_messages("alice-1") == [] and store.get_meta("alice-2") is None
    for session_id in ("alice-1", "alice-2"):
        assert not Episode.objects.filter(session_id=session_id).exists()
        assert not ThoughtLog.objects.filter(session_id=session_id).exists()
        assert not WorkingMemory.objects.filter(session_id=session_id).exists()
    assert not ProfileFact.objects.filter(owner_id=alice.pk).exists()
    # Someone else's conversation and memory are untouched.
    assert len(store.get_messages("bob-1")) > 0
    assert bob_memory == (
        Episode.objects.filter(session_id="bob-1").count(),
        WorkingMemory.objects.filter(session_id="bob-1").count(),
    )


# A real transaction: the user's delete rolls back as a whole, as it does outside tests.
@pytest.mark.django_db(transaction=True)
def test_a_failing_purge_keeps_the_account_and_its_sessions(backend, alice, monkeypatch):
    sessions.session_create(session_id="alice-1", owner_id=alice.id)
    turn_run(session_id="alice-1", text="hello")

    def broken(*, session_id):
        raise RuntimeError("memory store unavailable")

    monkeypatch.setattr("memory_app.receivers.memory_purge_for_session", broken)
    with pytest.raises(RuntimeError, match="memory store unavailable"):
        get_user_model().objects.get(pk=alice.pk).delete()
    assert get_user_model().objects.filter(pk=alice.pk).exists()
    assert len(get_store().get_messages("alice-1")) == 4
