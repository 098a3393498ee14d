"""docs/design.md §18 over HTTP: `mode` on POST …/messages/, cancel by DELETE, and what a
queue never does (outlive its session, run in another incarnation)."""

import pytest
from asgiref.sync import async_to_sync

from sessions_app import selectors
from sessions_app.models import QueuedPrompt
from sessions_app.runtime.loop import drain
from sessions_app.services import deletion, prompt_modes
from sessions_app.store import get_store
from tests.helpers import eventually

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_queued_message_answers_202_and_runs_with_no_tab_open(api, alice):
    api.post("/api/sessions/", {"id": "s1"}, format="json")
    response = api.post(
        "/api/sessions/s1/messages/", {"text": "what is 2+3", "mode": "queue"}, format="json"
    )
    assert response.status_code == 202
    assert set(response.json()) == {"queue_id", "position"}
    assert response.json()["position"] == 0

    def answered():
        entries = get_store().get_messages("s1")
        return entries if any(e.kind == "turn_end" for e in entries) else None

    entries = eventually(answered, what="the queued prompt ran")
    assert [e.content for e in entries if e.role == "user"] == ["what is 2+3"]
    assert "5" in entries[-2].content
    assert not QueuedPrompt.objects.exists()


def test_a_bad_mode_is_400_and_changes_nothing(api):
    api.post("/api/sessions/", {"id": "s1"}, format="json")
    response = api.post(
        "/api/sessions/s1/messages/", {"text": "hi", "mode": "later"}, format="json"
    )
    assert response.status_code == 400
    assert "mode" in response.json()["detail"]
    assert get_store().get_messages("s1") == []


def test_cancelling_what_is_not_waiting_is_404(api):
    api.post("/api/sessions/", {"id": "s1"}, format="json")
    response = api.delete("/api/sessions/s1/queue/q_nothing/")
    assert response.status_code == 404
    assert response.json()["code"] == "not_found"


def _waiting_row(session_id, incarnation, owner_id, text="what is 1+1"):
    return QueuedPrompt.objects.create(
        id=f"q_{text.replace(' ', '')}",
        session_id=session_id,
        incarnation=incarnation,
        owner_id=owner_id,
        kind="queue",
        text=text,
        rank=1,
    )


def test_a_prompt_queued_in_an_earlier_incarnation_never_runs(api, alice):
    api.post("/api/sessions/", {"id": "s1"}, format="json")
    _waiting_row("s1", "an-earlier-one", alice.id)
    async_to_sync(prompt_modes.queue_run_async)(session_id="s1")
    assert get_store().get_messages("s1") == []
    assert selectors.session_snapshot(session_id="s1", owner_id=alice.id)["queue"] == []


def test_deleting_a_session_removes_its_queue(api, alice):
    api.post("/api/sessions/", {"id": "s1"}, format="json")
    meta = get_store().get_meta("s1")
    _waiting_row("s1", meta.incarnation, alice.id)
    assert deletion.session_delete(session_id="s1", owner_id=alice.id)
    assert not QueuedPrompt.objects.filter(session_id="s1").exists()


def test_a_waiting_prompt_is_cancelled_by_its_owner_and_not_by_another(api, bob_api, alice):
    api.post("/api/sessions/", {"id": "s1"}, format="json")
    meta = get_store().get_meta("s1")
    row = _waiting_row("s1", meta.incarnation, alice.id)

    # Another user's DELETE answers as for a session that is not there, and cancels nothing.
    refused = bob_api.delete(f"/api/sessions/s1/queue/{row.id}/")
    assert refused.status_code == 404
    assert QueuedPrompt.objects.filter(id=row.id).exists()

    response = api.delete(f"/api/sessions/s1/queue/{row.id}/")
    assert response.status_code == 200
    assert response.json() == {"queue_id": row.id, "cancelled": True}
    assert not QueuedPrompt.objects.filter(id=row.id).exists()
    assert selectors.session_snapshot(session_id="s1", owner_id=alice.id)["queue"] == []
    assert api.delete(f"/api/sessions/s1/queue/{row.id}/").status_code == 404


def test_a_draining_worker_leaves_a_queued_prompt_for_another(api, alice, monkeypatch):
    api.post("/api/sessions/", {"id": "s1"}, format="json")
    meta = get_store().get_meta("s1")
    row = _waiting_row("s1", meta.incarnation, alice.id)
    with monkeypatch.context() as draining:
        draining.setattr(drain, "_draining", True)  # as after SIGTERM (docs/design.md §19)
        async_to_sync(prompt_modes.queue_run_async)(session_id="s1")
        assert QueuedPrompt.objects.filter(id=row.id).exists()
        assert get_store().get_messages("s1") == []

    # A worker that is not draining (the next one to touch the session) runs it.
    async_to_sync(prompt_modes.queue_run_async)(session_id="s1")
    assert not QueuedPrompt.objects.filter(id=row.id).exists()
    entries = get_store().get_messages("s1")
    assert [e.content for e in entries if e.role == "user"] == ["what is 1+1"]
    assert entries[-1].kind == "turn_end" and entries[-1].data["status"] == "completed"
