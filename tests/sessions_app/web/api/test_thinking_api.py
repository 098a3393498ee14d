"""The session's thinking level (docs/design.md §20): PATCH and `/think` set it, each change is
a `thinking_change` entry, and bad levels change nothing."""

import pytest

from sessions_app.web.commands import CommandError, command_run

pytestmark = pytest.mark.django_db


def changes(api, session_id="s1"):
    entries = api.get(f"/api/sessions/{session_id}/entries/").json()["entries"]
    return [e["data"] for e in entries if e["kind"] == "thinking_change"]


def test_patch_sets_thinking_and_records_the_change(api):
    created = api.post("/api/sessions/", {"id": "s1"}, format="json").json()
    assert created["thinking"] == "off"
    response = api.patch("/api/sessions/s1/", {"thinking": "high"}, format="json")
    assert response.status_code == 200 and response.json()["thinking"] == "high"
    assert api.get("/api/sessions/s1/").json()["thinking"] == "high"
    # Setting the level it has changes nothing; model and thinking go together.
    api.patch("/api/sessions/s1/", {"thinking": "high"}, format="json")
    both = api.patch(
        "/api/sessions/s1/", {"model": "openai:o4-mini", "thinking": "low"}, format="json"
    )
    assert (both.json()["model"], both.json()["thinking"]) == ("openai:o4-mini", "low")
    assert changes(api) == [{"from": "off", "to": "high"}, {"from": "high", "to": "low"}]


@pytest.mark.parametrize("body", [{"thinking": "extreme"}, {"thinking": ""}, {}])
def test_a_bad_level_or_an_empty_patch_is_refused_and_changes_nothing(api, body):
    api.post("/api/sessions/", {"id": "s1"}, format="json")
    response = api.patch("/api/sessions/s1/", body, format="json")
    assert response.status_code == 400 and response.json()["code"] == "invalid"
    assert api.get("/api/sessions/s1/").json()["thinking"] == "off"
    assert changes(api) == []


def test_another_users_session_is_not_found(api, bob_api):
    api.post("/api/sessions/", {"id": "s1"}, format="json")
    assert (
        bob_api.patch("/api/sessions/s1/", {"thinking": "high"}, format="json").status_code == 404
    )
    assert changes(api) == []


def test_think_shows_and_sets_the_level(api, alice):
    api.post("/api/sessions/", {"id": "s1"}, format="json")
    shown = command_run(session_id="s1", owner_id=alice.id, line="/think")
    assert shown.data == {"thinking": "off"} and "off" in shown.text
    done = command_run(session_id="s1", owner_id=alice.id, line="/think medium")
    assert done.data["thinking"] == "medium" and done.data["session"]["thinking"] == "medium"
    with pytest.raises(CommandError) as refused:
        command_run(session_id="s1", owner_id=alice.id, line="/think hard")
    assert refused.value.code == "bad_request"
    assert changes(api) == [{"from": "off", "to": "medium"}]
