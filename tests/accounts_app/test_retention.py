"""Retention (docs/design.md §21): sessions idle past their policy go with their memory;
test sessions after TEST_SESSION_RETENTION_DAYS; never one with a socket or a running turn."""

from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from django.utils import timezone
from django_tasks import TaskResultStatus
from django_tasks_db.models import DBTaskResult

from accounts_app.retention import retention_days_set
from accounts_app.tasks import retention_sweep_periodic, retention_sweep_schedule
from memory_app.models import Episode
from sessions_app.models import Session
from sessions_app.runtime.turn.lease import TurnLease
from sessions_app.runtime.turn.turns import turn_run
from sessions_app.services import connections, sessions
from sessions_app.store import get_store

pytestmark = pytest.mark.django_db


def _chat(owner, session_id, text="hello"):
    sessions.session_create(session_id=session_id, owner_id=owner.id)
    turn_run(session_id=session_id, text=text)


def _ids(owner) -> set[str]:
    return {meta.id for meta in get_store().list(owner_id=owner.id)}


def _sweep(*args) -> str:
    out = StringIO()
    call_command("retention_sweep", *args, stdout=out)
    return out.getvalue()


def test_eight_days_ahead_removes_the_test_sessions_and_keeps_the_rest(backend, alice, bob):
    _chat(alice, "test-probe-1")
    _chat(alice, "live-check")
    _chat(alice, "groceries")
    _chat(bob, "bob-chat")
    eight_days_ahead = (timezone.now() + timedelta(days=8)).isoformat()

    dry = _sweep("--dry-run", "--as-of", eight_days_ahead)
    assert "would delete test-probe-1" in dry and "would delete live-check" in dry
    assert _ids(alice) == {"test-probe-1", "live-check", "groceries"}

    _sweep("--as-of", eight_days_ahead)
    assert _ids(alice) == {"groceries"}
    assert _ids(bob) == {"bob-chat"}
    assert get_store().get_messages("test-probe-1") == []


def test_retention_days_30_deletes_a_session_idle_31_days_with_its_memory(
    backend, api, alice, bob, settings
):
    settings.RETENTION_DAYS = None
    assert (
        api.patch("/api/me/", {"retention_days": 30}, format="json").json()["retention_days"] == 30
    )
    _chat(alice, "old-chat", "My name is Sam")
    _chat(bob, "bob-chat")
    assert Episode.objects.filter(session_id="old-chat").exists()

    _sweep("--as-of", (timezone.now() + timedelta(days=29)).isoformat())
    assert _ids(alice) == {"old-chat"}

    _sweep("--as-of", (timezone.now() + timedelta(days=31)).isoformat())
    assert _ids(alice) == set()
    assert not Episode.objects.filter(session_id="old-chat").exists()
    # Bob keeps the operator's default, which is forever.
    assert _ids(bob) == {"bob-chat"}


def test_a_session_open_in_a_tab_or_running_a_turn_is_kept_until_a_later_sweep(alice):
    _chat(alice, "test-open")
    _chat(alice, "test-busy")
    connections.connection_open(session_id="test-open", channel_name="tab-1", user_id=alice.id)
    lease = TurnLease.for_session("test-busy").acquire(wait_sec=0)
    later = (timezone.now() + timedelta(days=8)).isoformat()
    try:
        report = _sweep("--as-of", later)
    finally:
        lease.release()
    assert "kept test-open for now: open in a browser tab" in report
    assert "kept test-busy for now: a turn is running" in report
    assert _ids(alice) == {"test-open", "test-busy"}

    connections.connection_close(channel_name="tab-1")
    _sweep("--as-of", later)
    assert _ids(alice) == set()


def test_the_me_api_refuses_a_retention_that_is_not_a_positive_number_of_days(api):
    answer = api.patch("/api/me/", {"retention_days": 0}, format="json")
    assert answer.status_code == 400 and answer.json()["code"] == "invalid"
    assert api.get("/api/me/").json()["retention_days"] is None
    assert api.patch("/api/me/", {"retention_days": None}, format="json").status_code == 200


def test_the_periodic_sweep_queues_its_next_run_once(alice, settings):
    settings.TEST_SESSION_RETENTION_DAYS = 7
    _chat(alice, "test-old")
    assert retention_sweep_schedule() is True
    assert retention_sweep_schedule() is False  # one chain, however often it is started
    waiting = DBTaskResult.objects.filter(
        task_path=retention_sweep_periodic.module_path, status=TaskResultStatus.READY
    )
    assert waiting.count() == 1
    assert waiting.get().run_after > timezone.now() + timedelta(minutes=30)


def test_a_periodic_run_sweeps_and_queues_the_next_one(alice, settings):
    _chat(alice, "test-old")
    _chat(alice, "keep-me")
    settings.TEST_SESSION_RETENTION_DAYS = 7
    sessions.session_create(session_id="test-new", owner_id=alice.id)
    Session.objects.filter(id="test-old").update(updated_at=timezone.now() - timedelta(days=8))

    assert retention_sweep_periodic.call() == 1

    assert _ids(alice) == {"keep-me", "test-new"}
    assert (
        DBTaskResult.objects.filter(
            task_path=retention_sweep_periodic.module_path, status=TaskResultStatus.READY
        ).count()
        == 1
    )


def test_a_sub_agent_session_goes_with_its_conversation_not_before(backend, alice):
    _chat(alice, "trip", "ask researcher to find tea shops")
    (helper,) = _ids(alice) - {"trip"}
    assert get_store().get_meta(helper).spawned_by == "trip"
    retention_days_set(owner_id=alice.id, retention_days=30)
    later = timezone.now() + timedelta(days=31)

    # Listed once: the sub-agent's session is not a candidate of its own while its
    # conversation exists; it goes with it.
    report = _sweep("--dry-run", "--as-of", later.isoformat())
    assert f"would delete trip of user {alice.id}" in report and helper not in report

    _sweep("--as-of", later.isoformat())
    assert _ids(alice) == set()


def test_a_swept_session_leaves_its_export_files_until_export_retention_days(
    alice, settings, django_capture_on_commit_callbacks
):
    settings.EXPORT_RETENTION_DAYS = 30
    _chat(alice, "test-exported")
    _chat(alice, "kept")
    for session_id in ("test-exported", "kept"):
        sessions.session_export(session_id=session_id, owner_id=alice.id, fmt="md")
    exports = settings.EXPORTS_DIR / str(alice.id)

    with django_capture_on_commit_callbacks(execute=True):
        _sweep("--as-of", (timezone.now() + timedelta(days=8)).isoformat())
    assert _ids(alice) == {"kept"}
    # The person's copy (docs/design.md §31): it outlives the swept session.
    assert sorted(path.name for path in exports.iterdir()) == ["kept.md", "test-exported.md"]

    dry = _sweep("--dry-run", "--as-of", (timezone.now() + timedelta(days=31)).isoformat())
    assert "would remove 2 export file(s) older than 30 days" in dry
    assert len(list(exports.iterdir())) == 2
    _sweep("--as-of", (timezone.now() + timedelta(days=31)).isoformat())
    assert list(exports.iterdir()) == []
