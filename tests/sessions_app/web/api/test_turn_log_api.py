"""A turn's log through the API (docs/design.md §20): every entry's schema version, and the
timeline of model calls and tool calls with their timings."""

import re
from datetime import datetime

import pytest

pytestmark = pytest.mark.django_db


def run_turn(api, session_id: str, text: str) -> dict:
    api.post("/api/sessions/", {"id": session_id}, format="json")
    response = api.post(f"/api/sessions/{session_id}/messages/", {"text": text}, format="json")
    assert response.status_code == 200, response.content
    return response.json()


def test_every_entry_shows_its_schema_version(api):
    turn = run_turn(api, "s1", "what is 6*7?")
    assert {entry["v"] for entry in turn["entries"]} == {1}
    listed = api.get("/api/sessions/s1/entries/").json()["entries"]
    assert len(listed) == len(turn["entries"]) and {entry["v"] for entry in listed} == {1}
    exported = api.get("/api/sessions/s1/export/?format=json").json()["entries"]
    assert {entry["v"] for entry in exported} == {1}


def test_the_timeline_shows_each_model_call_and_its_tools(api):
    turn = run_turn(api, "s1", "what is 6*7?")
    timeline = api.get(f"/api/sessions/s1/turns/{turn['turn_id']}/").json()

    assert timeline["turn_id"] == turn["turn_id"]
    assert timeline["status"] == "completed"
    asking, answering = timeline["steps"]
    assert asking["model_call"]["model"] == "offline"
    assert asking["model_call"]["finish_reason"] == "tool_calls"
    assert asking["model_call"]["usage"]["input_tokens"] > 0
    (calculator,) = asking["tools"]
    call = next(e for e in turn["entries"] if e["tool_calls"])["tool_calls"][0]
    assert calculator["call_id"] == call["id"] and calculator["name"] == "calculator"
    assert calculator["outcome"] == "ok"
    assert answering["model_call"]["finish_reason"] == "stop" and answering["tools"] == []
    # Each fact is a start and a duration, in the order things happened.
    started = datetime.fromisoformat(timeline["started_at"])
    model_start = datetime.fromisoformat(asking["model_call"]["started_at"])
    tool_start = datetime.fromisoformat(calculator["started_at"])
    answer_start = datetime.fromisoformat(answering["model_call"]["started_at"])
    assert started <= model_start <= tool_start <= answer_start
    for fact in (asking["model_call"], calculator, answering["model_call"]):
        assert isinstance(fact["duration_ms"], int) and fact["duration_ms"] >= 0


def test_a_failed_tool_shows_as_an_error_and_timings_never_reach_the_model(api):
    turn = run_turn(api, "s1", "what is 1/0?")
    timeline = api.get(f"/api/sessions/s1/turns/{turn['turn_id']}/").json()
    assert timeline["steps"][0]["tools"][0]["outcome"] == "error"
    context = api.get("/api/sessions/s1/context/?format=openai").json()
    assert "duration_ms" not in str(context) and "started_at" not in str(context)


def test_another_users_turn_and_an_unknown_turn_are_not_found(api, bob_api):
    turn = run_turn(api, "s1", "hello")
    assert bob_api.get(f"/api/sessions/s1/turns/{turn['turn_id']}/").status_code == 404
    missing = api.get("/api/sessions/s1/turns/turn_nope/")
    assert missing.status_code == 404 and missing.json()["code"] == "not_found"


def test_the_markdown_export_says_how_long_each_call_took(api):
    run_turn(api, "s1", "what is 6*7?")
    markdown = api.get("/api/sessions/s1/export/?format=md").content.decode()
    tool_heading = next(line for line in markdown.splitlines() if "Tool result" in line)
    assert re.search(r" · \d+ ms\)$| · \d+\.\d s\)$", tool_heading), tool_heading
    answer_heading = next(line for line in markdown.splitlines() if "Assistant" in line)
    assert re.search(r"offline · (\d+ ms|\d+\.\d s)\)$", answer_heading), answer_heading
