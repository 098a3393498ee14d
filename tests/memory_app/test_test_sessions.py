"""Test sessions teach the user nothing: consolidation, the idle sweep and procedures skip them."""

from datetime import timedelta

import pytest
from django.utils import timezone

from memory_app.models import Episode, Procedure, ProfileFact
from memory_app.services import memory_consolidate
from memory_app.tasks import memory_consolidate_enqueue, memory_consolidate_idle
from sessions_app.selectors import session_delivery_target
from sessions_app.store import NewEntry, get_store
from tests.builders import arithmetic_turn, play_turn

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("prefix", ["test-", "live-", "probe-", "exp-"])
def test_a_test_sessions_statements_never_become_profile_facts(alice, prefix):
    session_id = f"{prefix}run"
    play_turn(session_id, "My name is Mallory. I live in Nowhere.", "ok", owner_id=alice.id)

    assert memory_consolidate(session_id=session_id) == {
        "episodes": 0,
        "facts": 0,
        "procedures": 0,
    }
    assert not ProfileFact.objects.exists()
    assert Episode.objects.get(session_id=session_id).consolidated_at is None


def test_the_idle_sweep_and_the_session_end_never_queue_a_test_session(
    alice, settings, django_capture_on_commit_callbacks
):
    settings.CONSOLIDATE_IDLE_SEC = 1
    play_turn("test-idle", "I love jazz", "ok", owner_id=alice.id)
    play_turn("real-idle", "I love tea", "ok", owner_id=alice.id)
    later = timezone.now() + timedelta(hours=1)

    with django_capture_on_commit_callbacks(execute=True) as queued:
        assert memory_consolidate_idle(now=later) == ["real-idle"]
        memory_consolidate_enqueue(session_id="test-idle")
    assert len(queued) == 1
    assert set(ProfileFact.objects.values_list("key", flat=True)) == {"likes:tea"}


def test_calculations_in_test_sessions_do_not_count_toward_a_procedure(alice):
    for number in range(3):
        arithmetic_turn("test-maths", f"{number}+1", str(number + 1), owner_id=alice.id)
    arithmetic_turn("real-maths", "2*2", "4", owner_id=alice.id)
    memory_consolidate(session_id="real-maths")
    assert not Procedure.objects.exists(), "one real success is not three"


def test_the_delivery_target_is_the_latest_real_conversation(alice, bob, backend):
    store = get_store()
    assert session_delivery_target(owner_id=alice.id) is None
    store.create("older", owner_id=alice.id)
    store.create("newer", owner_id=alice.id)
    store.create("test-newest", owner_id=alice.id)
    store.create(
        "agent_researcher__newer", agent="researcher", owner_id=alice.id, spawned_by="newer"
    )
    store.create("bobs", owner_id=bob.id)
    # Activity in this order: the latest real conversation is "newer".
    for session_id in ("older", "newer", "test-newest", "agent_researcher__newer", "bobs"):
        store.append(session_id, [NewEntry(role="user", content="hi")])
    assert session_delivery_target(owner_id=alice.id).id == "newer"
