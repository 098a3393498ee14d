"""POST /api/sessions/{id}/approvals/{call_id}/: the owner answers a waiting tool call."""

import threading

import pytest
from django.db import connections

from sessions_app.runtime.turn.turns import turn_run
from sessions_app.store import get_store
from tests.helpers import GUARD_SEC

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_owner_answers_once_and_every_other_answer_has_a_code(alice, api, bob_api):
    get_store().create("appr-api", owner_id=alice.id)
    asked = threading.Event()
    requests, outcome = [], {}

    def on_event(event):
        if event["type"] == "approval_request":
            requests.append(event)
            asked.set()

    def run():
        try:
            outcome["result"] = turn_run(
                session_id="appr-api", text="forget my color", owner_id=alice.id, on_event=on_event
            )
        finally:
            connections.close_all()  # the thread's own connection, or the test DB stays in use

    turn = threading.Thread(target=run)
    turn.start()
    assert asked.wait(GUARD_SEC)
    url = f"/api/sessions/appr-api/approvals/{requests[0]['call_id']}/"

    assert bob_api.post(url, {"allow": True}, format="json").json()["code"] == "not_found"
    missing = api.post(
        "/api/sessions/appr-api/approvals/call_nope/", {"allow": True}, format="json"
    )
    assert (missing.status_code, missing.json()["code"]) == (404, "not_found")
    bad = api.post(url, {"allow": "perhaps"}, format="json")
    assert (bad.status_code, bad.json()["code"]) == (400, "invalid")
    for call_id in ("call%00x", "c" * 201):
        bad = api.post(f"/api/sessions/appr-api/approvals/{call_id}/", {"allow": True})
        assert (bad.status_code, bad.json()["code"]) == (400, "invalid"), call_id

    answered = api.post(url, {"allow": False}, format="json")
    assert answered.status_code == 200
    assert answered.json() == {"call_id": requests[0]["call_id"], "status": "denied"}
    again = api.post(url, {"allow": True}, format="json")
    assert (again.status_code, again.json()["code"]) == (409, "approval_closed")

    turn.join(GUARD_SEC)
    result = outcome["result"]
    tool = next(e for e in result.entries if e.role == "tool")
    assert tool.is_error and tool.content.startswith("denied")
