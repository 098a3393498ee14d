"""The API around agents: sub-agent sessions in the list, and PATCH {model}."""

import pytest

from sessions_app.store import get_store
from sessions_app.store.request_headers import header_get
from tests.fakes.llm_server import FakeLLMServer, Reply

pytestmark = pytest.mark.django_db(transaction=True)


def test_sub_agent_sessions_are_listed_only_when_asked_for(api, alice):
    api.post("/api/sessions/", {"id": "work"}, format="json")
    answer = api.post("/api/sessions/work/messages/", {"text": "ask researcher to compute 6*7"})
    assert answer.status_code == 200
    assert answer.json()["entries"][-2]["content"] == "researcher says: 6*7 = 42."

    default = api.get("/api/sessions/").json()
    assert [row["id"] for row in default] == ["work"]
    assert default[0]["spawned_by"] is None and default[0]["model"] == ""
    everything = api.get("/api/sessions/?include_subagents=true").json()
    assert {row["id"]: row["spawned_by"] for row in everything} == {
        "work": None,
        "agent_researcher__work": "work",
    }
    detail = api.get("/api/sessions/agent_researcher__work/").json()
    assert (detail["agent"], detail["spawned_by"]) == ("researcher", "work")


def test_patch_sets_the_model_and_records_the_change(api, alice, settings):
    settings.JARVIS_MODEL = "offline"
    api.post("/api/sessions/", {"id": "work"}, format="json")

    changed = api.patch("/api/sessions/work/", {"model": "openai:gpt-4o"}, format="json")
    assert changed.status_code == 200
    assert changed.json()["model"] == "openai:gpt-4o"
    again = api.patch("/api/sessions/work/", {"model": "openai:gpt-4o"}, format="json")
    assert again.status_code == 200
    entries = api.get("/api/sessions/work/entries/").json()["entries"]
    assert [(e["kind"], e["data"]) for e in entries] == [
        ("model_change", {"from": "offline", "to": "openai:gpt-4o"})
    ], "setting the same model again records nothing"


@pytest.mark.parametrize(
    "model", ["gpt-4o", "openai:", "anthropic: x", "", "openai:gpt 4o", "local:x"]
)
def test_a_bad_model_is_refused_and_changes_nothing(api, alice, model):
    api.post("/api/sessions/", {"id": "work"}, format="json")
    response = api.patch("/api/sessions/work/", {"model": model}, format="json")
    assert response.status_code == 400
    # The code /model answers too (tests/sessions_app/management/test_slash_commands.py).
    assert response.json()["code"] == "bad_model"
    assert get_store().get_meta("work").model == ""
    assert get_store().get_messages("work") == []


def test_patch_of_another_users_session_is_404(api, bob_api, alice):
    api.post("/api/sessions/", {"id": "work"}, format="json")
    response = bob_api.patch("/api/sessions/work/", {"model": "offline"}, format="json")
    assert response.status_code == 404
    assert get_store().get_messages("work") == []


def test_turns_use_the_sessions_model_and_record_the_whole_request(api, alice, settings):
    with FakeLLMServer() as server:
        settings.OPENAI_BASE_URL = server.openai_url
        settings.OPENAI_API_KEY = "test"
        server.script(Reply(text="hello from the fake"))
        api.post("/api/sessions/", {"id": "work"}, format="json")
        api.patch("/api/sessions/work/", {"model": "openai:gpt-4o"}, format="json")
        result = api.post("/api/sessions/work/messages/", {"text": "hi"}).json()

    assert result["status"] == "completed"
    (request,) = server.requests
    assert request["model"] == "gpt-4o"
    start = next(e for e in result["entries"] if e["kind"] == "turn_start")
    assert start["data"]["model"] == "openai:gpt-4o"
    # The stored turn_start names the header that, with the entries, rebuilds what was sent.
    data = header_get(start["data"]["header"])
    assert data["parameters"] == {
        key: value for key, value in request.items() if key not in {"model", "messages", "tools"}
    }
    assert request["messages"][0] == {"role": "system", "content": data["system"]}
    assert request["tools"] == [
        {
            "type": "function",
            "function": {
                "name": tool["name"],
                "description": tool["description"],
                "parameters": tool["parameters"],
            },
        }
        for tool in data["tools"]
    ]
