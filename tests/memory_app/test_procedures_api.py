"""The person approves their procedures (docs/design.md §29): `GET /api/me/procedures/` lists
their drafts and approved ones, `PATCH /api/me/procedures/{id}/` decides one. An approved
procedure is in the next turn's request, as the fake OpenAI server receives it through the
official SDK and as the request replay rebuilds it; a rejected one never is."""

import json

import pytest

from memory_app.models import Procedure
from sessions_app.runtime.turn.turns import turn_run
from tests.builders import token_client
from tests.fakes.llm_server import serving_both_sdks
from tests.memory_app.test_memory_in_context import first_turn, replayed, system_sent

pytestmark = pytest.mark.django_db(transaction=True)

MODEL = "openai:gpt-4o"
STEPS = [{"tool": "calculator", "text": "Call the `calculator` tool with the expression."}]


@pytest.fixture
def server(settings):
    with serving_both_sdks(settings) as running:
        yield running


def draft(owner, task_kind: str, status=Procedure.Status.DRAFT) -> Procedure:
    return Procedure.objects.create(
        owner=owner,
        task_kind=task_kind,
        title=f"How to handle {task_kind} requests",
        steps=STEPS,
        status=status,
    )


def test_a_person_lists_their_drafts_and_approved_procedures_only(alice, bob):
    mine = draft(alice, "arithmetic")
    approved = draft(alice, "time", Procedure.Status.APPROVED)
    draft(alice, "wait", Procedure.Status.REJECTED)
    draft(bob, "arithmetic")

    answer = token_client(alice).get("/api/me/procedures/")

    assert answer.status_code == 200
    listed = answer.json()["procedures"]
    assert [(p["id"], p["status"]) for p in listed] == [
        (mine.id, "draft"),
        (approved.id, "approved"),
    ]
    assert listed[0]["title"] == "How to handle arithmetic requests"
    assert listed[0]["steps"] == ["Call the `calculator` tool with the expression."]
    assert listed[0]["decided_at"] is None


def test_an_approved_draft_reaches_the_next_turn_and_a_rejected_one_never(backend, server, alice):
    arithmetic = draft(alice, "arithmetic")
    clock = draft(alice, "time")
    first_turn(alice, "chat", "what is 6*7?", MODEL)
    assert "calculator` tool" not in system_sent(server.requests[-1]), "a draft is not approved"

    me = token_client(alice)
    approved = me.patch(
        f"/api/me/procedures/{arithmetic.id}/", {"status": "approved"}, format="json"
    )
    rejected = me.patch(f"/api/me/procedures/{clock.id}/", {"status": "rejected"}, format="json")
    assert (approved.status_code, approved.json()["status"]) == (200, "approved")
    assert approved.json()["decided_at"] is not None
    assert (rejected.status_code, rejected.json()["status"]) == (200, "rejected")

    result = turn_run(session_id="chat", text="and 7*8?", owner_id=alice.id)
    assert result.status == "completed", result.error
    asked = server.requests[-1]
    system = system_sent(asked)
    assert "How to handle arithmetic requests: Call the `calculator` tool" in system
    assert "How to handle time requests" not in json.dumps(server.requests)
    assert replayed(alice, "chat", result.turn_id) == [asked], "replay is exact"
    assert [p["id"] for p in me.get("/api/me/procedures/").json()["procedures"]] == [arithmetic.id]

    # Changing one's mind: a rejected procedure stops reaching the model from the next turn.
    me.patch(f"/api/me/procedures/{arithmetic.id}/", {"status": "rejected"}, format="json")
    turn_run(session_id="chat", text="and 8*9?", owner_id=alice.id)
    assert "How to handle arithmetic requests" not in system_sent(server.requests[-1])


def test_another_person_s_procedure_is_not_found_and_a_bad_status_is_refused(alice, bob):
    bobs = draft(bob, "arithmetic")
    mine = draft(alice, "time")
    me = token_client(alice)

    for missing in (bobs.id, 999_999):
        answer = me.patch(f"/api/me/procedures/{missing}/", {"status": "approved"}, format="json")
        assert answer.status_code == 404, answer.content
        assert answer.json()["code"] == "not_found"
    for bad in ({"status": "maybe"}, {"status": "draft"}, {"status": ["approved"]}):
        answer = me.patch(f"/api/me/procedures/{mine.id}/", bad, format="json")
        assert answer.status_code == 400, (bad, answer.content)
        assert answer.json()["code"] == "invalid"
    refused = me.patch(f"/api/me/procedures/{mine.id}/", {"status": "maybe"}, format="json")
    assert refused.json()["detail"] == 'status: status is "approved" or "rejected", not "maybe"'
    assert token_client(bob).get("/api/me/procedures/").json()["procedures"][0]["status"] == "draft"
    # A PATCH without a status changes nothing (as a goal's does).
    unchanged = me.patch(f"/api/me/procedures/{mine.id}/", {}, format="json")
    assert (unchanged.status_code, unchanged.json()["status"]) == (200, "draft")
    mine.refresh_from_db()
    assert (mine.status, mine.decided_at) == ("draft", None)
