"""GET/POST /api/goals/ and PATCH /api/goals/{id}/: a person sees and changes only their own
goals; pause stops check-ins, resume continues them, cancel ends the goal and its running
turn; the limits answer with their codes and change nothing."""

import threading

import pytest

from notices_app.models import Goal
from sessions_app.services import sessions
from sessions_app.web.commands import CommandError, command_run
from tests.handshakes import hold_waits
from tests.helpers import GUARD_SEC
from tests.notices_app.schedules.conftest import worker

from .conftest import check_ins_due, run_due_tasks, turn_starts

pytestmark = pytest.mark.django_db(transaction=True)


def test_set_list_and_see_a_goal(backend, api, bob_api, alice, chat):
    created = api.post(
        "/api/goals/", {"text": "learn what 2+2 is", "report_to": chat}, format="json"
    )
    assert created.status_code == 201, created.json()
    body = created.json()
    assert body["status"] == "active"
    assert (body["report_to"], body["check_every_sec"], body["max_turns"]) == (chat, 3600, 10)
    assert body["session_id"].startswith("agent_goal__")
    assert [goal["id"] for goal in api.get("/api/goals/").json()["goals"]] == [body["id"]]
    assert api.get(f"/api/goals/{body['id']}/").json()["id"] == body["id"]
    # Another person: nothing listed, and their goal is missing exactly like no goal.
    assert bob_api.get("/api/goals/").json() == {"goals": []}
    for path in [f"/api/goals/{body['id']}/", "/api/goals/999999/"]:
        missing = bob_api.get(path)
        assert (missing.status_code, missing.json()["code"]) == (404, "not_found")
        patched = bob_api.patch(path, {"status": "cancelled"}, format="json")
        assert (patched.status_code, patched.json()["code"]) == (404, "not_found")
    assert Goal.objects.get().status == "active"


def test_bad_input_is_400_and_sets_no_goal(backend, api, bob, chat):
    sessions.session_create(owner_id=bob.id, session_id="bobs-chat")
    for body in [
        {"text": ""},
        {"text": "x" * 20_001},
        {"text": "a\x00b"},
        {"text": "ok", "check_every_sec": 10},  # under GOAL_MIN_CHECK_SEC
        {"text": "ok", "max_turns": 0},
        {"text": "ok", "max_turns": 101},
        {"text": "ok", "report_to": "../etc"},
    ]:
        answer = api.post("/api/goals/", body, format="json")
        assert answer.status_code == 400, (body, answer.json())
        assert answer.json()["code"] in {"invalid", "bad_id"}
    # Someone else's conversation is missing, exactly like no conversation.
    for report_to in ["bobs-chat", "no-such-chat"]:
        answer = api.post("/api/goals/", {"text": "ok", "report_to": report_to}, format="json")
        assert (answer.status_code, answer.json()["code"]) == (404, "not_found")
    assert not Goal.objects.exists()
    assert check_ins_due(0) == []


def test_the_open_goal_limit_answers_429_too_many_goals(backend, api, alice, chat, settings):
    settings.MAX_ACTIVE_GOALS_PER_USER = 2
    first = api.post("/api/goals/", {"text": "one"}, format="json").json()
    api.post("/api/goals/", {"text": "two"}, format="json")
    api.patch(f"/api/goals/{first['id']}/", {"status": "paused"}, format="json")  # still open
    refused = api.post("/api/goals/", {"text": "three"}, format="json")
    assert refused.status_code == 429
    assert refused.json()["code"] == "too_many_goals"
    with pytest.raises(CommandError) as error:
        command_run(session_id=chat, owner_id=alice.id, line="/goal three")
    assert error.value.code == "too_many_goals"
    assert Goal.objects.count() == 2
    # A cancelled goal gives its place back.
    api.patch(f"/api/goals/{first['id']}/", {"status": "cancelled"}, format="json")
    assert api.post("/api/goals/", {"text": "three"}, format="json").status_code == 201


def test_pause_stops_check_ins_and_resume_continues_them(backend, api, alice, chat):
    goal = api.post("/api/goals/", {"text": "find a flat in Lisbon"}, format="json").json()
    paused = api.patch(f"/api/goals/{goal['id']}/", {"status": "paused"}, format="json")
    assert paused.json()["status"] == "paused"
    run_due_tasks()
    assert turn_starts(goal["session_id"]) == []  # the first check-in never ran
    assert check_ins_due(goal["id"]) == []

    resumed = api.patch(f"/api/goals/{goal['id']}/", {"status": "active"}, format="json")
    assert resumed.json()["status"] == "active"
    run_due_tasks()
    assert len(turn_starts(goal["session_id"])) == 1
    assert Goal.objects.get().turns_used == 1
    # A finished goal stays finished.
    api.patch(f"/api/goals/{goal['id']}/", {"status": "cancelled"}, format="json")
    again = api.patch(f"/api/goals/{goal['id']}/", {"status": "active"}, format="json")
    assert (again.status_code, again.json()["code"]) == (400, "invalid")
    bad = api.patch(f"/api/goals/{goal['id']}/", {"status": "done"}, format="json")
    assert bad.status_code == 400


def test_cancel_ends_the_goal_and_its_running_check_in(backend, api, alice, chat, monkeypatch):
    held = hold_waits(monkeypatch)
    goal = api.post(
        "/api/goals/", {"text": "wait 1 second, then work out 6*7"}, format="json"
    ).json()

    def run_worker():
        try:
            worker().run()
        finally:
            from django.db import connections

            connections.close_all()

    running = threading.Thread(target=run_worker)
    running.start()
    assert held.started.wait(GUARD_SEC), "the check-in's turn reached its wait"
    cancelled = api.patch(f"/api/goals/{goal['id']}/", {"status": "cancelled"}, format="json")
    assert cancelled.json()["status"] == "cancelled"
    # The held wait now runs as the real tool, which finds its turn aborted.
    held.release()
    running.join(GUARD_SEC)
    assert not running.is_alive(), "the check-in's turn ended"

    from sessions_app.store import get_store

    ends = [e for e in get_store().get_messages(goal["session_id"]) if e.kind == "turn_end"]
    assert [end.data["status"] for end in ends] == ["aborted"]
    stored = Goal.objects.get()
    assert (stored.status, stored.result) == ("cancelled", "")
    assert check_ins_due(goal["id"]) == []  # nothing follows
    assert get_store().get_proactive(chat) == []
    assert stored.checking_since is None
