"""Every answer of the API has exactly the shape its output serializer documents.

The selectors and services build the answers; the output serializers only describe them (in
the OpenAPI schema). These tests take real answers, on both store backends, and check each
against its serializer: no key the serializer does not name, none it requires missing, every
value one it accepts (type, null, blank, choice), and serializing the answer through it gives
the answer back unchanged.
"""

import threading

import pytest
from django.db import connections
from rest_framework import serializers as drf
from rest_framework.test import APIClient

from notices_app.web import serializers as schedule_serializers
from sessions_app.runtime.turn.turns import turn_run
from sessions_app.store import NewEntry, get_store
from sessions_app.web import serializers as out


def shape_differences(serializer, value, path="answer") -> list[str]:
    """Keys that the answer has and the serializer does not name, or that it requires and
    the answer lacks, at every depth."""
    if value is None:
        return []
    if isinstance(serializer, drf.ListSerializer):
        return [
            difference
            for index, item in enumerate(value)
            for difference in shape_differences(serializer.child, item, f"{path}[{index}]")
        ]
    if not isinstance(serializer, drf.Serializer):
        return []
    fields = serializer.fields
    name = type(serializer).__name__
    differences = [f"{path}.{key}: not in {name}" for key in sorted(value.keys() - fields.keys())]
    differences += [
        f"{path}.{key}: required by {name}, missing"
        for key, field in fields.items()
        if field.required and key not in value
    ]
    for key, field in fields.items():
        if key in value:
            differences += shape_differences(field, value[key], f"{path}.{key}")
    return differences


def assert_documented(serializer_class, answer):
    many = isinstance(answer, list)
    assert shape_differences(serializer_class(many=many), answer) == []
    accepted = serializer_class(data=answer, many=many)
    assert accepted.is_valid(), accepted.errors
    assert serializer_class(answer, many=many).data == answer


def answer_of(response, status: int):
    assert response.status_code == status, response.content
    return response.json()


def test_the_answers_about_sessions_are_documented(api):
    created = answer_of(
        api.post("/api/sessions/", {"id": "shapes", "title": "Taxes"}, format="json"), 201
    )
    assert_documented(out.SessionOutput, created)
    untitled = answer_of(api.post("/api/sessions/", {}, format="json"), 201)
    assert_documented(out.SessionOutput, untitled)
    assert_documented(
        out.SessionOutput,
        answer_of(api.post("/api/sessions/", {"id": "shapes"}, format="json"), 200),
    )

    for text in (
        "remember that my color is blue and what is 2+3?",
        "ask researcher to compute 6*7",
        "What is my color?",
    ):
        turn = answer_of(api.post("/api/sessions/shapes/messages/", {"text": text}), 200)
        assert_documented(out.TurnOutput, turn)
    compaction = answer_of(api.post("/api/sessions/shapes/compact/"), 201)
    assert_documented(out.EntryOutput, compaction)
    # A reply of a model without a price, so the cost has a null.
    get_store().append(
        "shapes",
        [
            NewEntry(
                role="assistant",
                content="Done.",
                model="openai:gpt-unpriced",
                usage={"input_tokens": 10, "output_tokens": 2},
            )
        ],
    )

    listing = answer_of(api.get("/api/sessions/?include_subagents=true"), 200)
    assert any(row["spawned_by"] == "shapes" for row in listing)
    assert_documented(out.SessionOutput, listing)
    assert_documented(out.SessionDetailOutput, answer_of(api.get("/api/sessions/shapes/"), 200))
    entries = answer_of(api.get("/api/sessions/shapes/entries/"), 200)
    assert {entry["kind"] for entry in entries["entries"]} == {
        "turn_start",
        "message",
        "turn_end",
        "compaction",
    }
    assert_documented(out.EntriesOutput, entries)
    assert_documented(
        out.EntriesOutput, answer_of(api.get("/api/sessions/shapes/entries/?after_seq=999"), 200)
    )
    for fmt in ("openai", "anthropic"):
        context = answer_of(api.get(f"/api/sessions/shapes/context/?format={fmt}"), 200)
        assert_documented(out.ContextOutput, context)
    cost = answer_of(api.get("/api/sessions/shapes/cost/"), 200)
    assert cost["total"]["usd"] is None
    assert_documented(out.CostOutput, cost)
    usage = answer_of(api.get("/api/sessions/shapes/usage/"), 200)
    assert usage["cost_usd"] is None and "researcher" in usage["sub_agents"]
    assert_documented(out.UsageOutput, usage)

    assert_documented(
        out.SessionOutput,
        answer_of(
            api.patch("/api/sessions/shapes/", {"model": "openai:gpt-4o"}, format="json"), 200
        ),
    )
    branch = answer_of(
        api.post("/api/sessions/shapes/branch/", {"id": "shapes-b", "at_seq": 3}, format="json"),
        201,
    )
    assert branch["parent_id"] == "shapes"
    assert_documented(out.SessionOutput, branch)

    notice = {"message_id": "m1", "content": "Stand up!"}
    assert_documented(
        out.NoticeOutput,
        answer_of(api.post("/api/sessions/shapes/proactive/", notice, format="json"), 201),
    )
    assert_documented(
        out.NoticeOutput,
        answer_of(api.post("/api/sessions/shapes/proactive/", notice, format="json"), 200),
    )
    assert_documented(out.NoticeOutput, answer_of(api.get("/api/sessions/shapes/proactive/"), 200))

    assert_documented(out.AbortOutput, answer_of(api.post("/api/sessions/shapes/abort/"), 200))
    assert_documented(out.DeleteOutput, answer_of(api.delete("/api/sessions/shapes-b/"), 200))
    assert_documented(out.DeleteOutput, answer_of(api.delete("/api/sessions/shapes-b/"), 200))


def test_the_answers_of_search_are_documented(api):
    api.post("/api/sessions/", {"id": "found"}, format="json")
    for text in ("remember that my color is blue", "my color is what?"):
        api.post("/api/sessions/found/messages/", {"text": text})

    first_page = answer_of(api.get("/api/search/?q=color&limit=1"), 200)
    assert first_page["hits"] and first_page["next_offset"] == 1
    assert_documented(out.SearchOutput, first_page)
    last_page = answer_of(api.get("/api/search/?q=color&limit=50"), 200)
    assert last_page["next_offset"] is None
    assert_documented(out.SearchOutput, last_page)
    assert_documented(out.SearchOutput, answer_of(api.get("/api/search/?q=nowhere"), 200))


def test_the_answers_about_schedules_are_documented(api):
    api.post("/api/sessions/", {"id": "planner"}, format="json")
    once = answer_of(
        api.post("/api/schedules/", {"text": "Call mum", "in_seconds": 60}, format="json"), 201
    )
    assert_documented(schedule_serializers.ScheduleOutput, once)
    repeating = {
        "kind": "prompt",
        "text": "What is 2+2?",
        "every": 2,
        "unit": "hours",
        "session_id": "planner",
    }
    assert_documented(
        schedule_serializers.ScheduleOutput,
        answer_of(api.post("/api/schedules/", repeating, format="json"), 201),
    )
    cancelled = answer_of(api.delete(f"/api/schedules/{once['id']}/"), 200)
    assert cancelled["state"] == "cancelled"
    assert_documented(schedule_serializers.ScheduleOutput, cancelled)
    for state in ("active", "all"):
        listing = answer_of(api.get(f"/api/schedules/?state={state}&limit=1"), 200)
        assert_documented(schedule_serializers.ScheduleListOutput, listing)


def test_the_error_answers_are_documented(api):
    api.post("/api/sessions/", {"id": "short"}, format="json")
    api.post("/api/sessions/short/messages/", {"text": "Hi"})
    errors = [
        answer_of(api.get("/api/sessions/nobody-has-this/"), 404),
        answer_of(api.get("/api/sessions/.dot/"), 400),
        answer_of(api.post("/api/sessions/", {"title": "x" * 10_000}, format="json"), 400),
        answer_of(
            api.post("/api/sessions/", {"id": "short", "agent": "coder"}, format="json"), 409
        ),
        answer_of(api.post("/api/sessions/short/compact/"), 409),
        answer_of(api.post("/api/schedules/", {"text": "x", "every": 1}, format="json"), 400),
        answer_of(api.delete("/api/schedules/999999/"), 404),
        answer_of(APIClient().get("/api/sessions/"), 401),
    ]
    assert "fields" in errors[2]
    for error in errors:
        assert_documented(out.ErrorOutput, error)


@pytest.mark.django_db(transaction=True)
def test_the_answer_to_an_approval_is_documented(api, alice):
    get_store().create("asks", owner_id=alice.id)
    asked = threading.Event()
    requests = []

    def on_event(event):
        if event["type"] == "approval_request":
            requests.append(event)
            asked.set()

    def run():
        try:
            turn_run(
                session_id="asks", text="forget my color", owner_id=alice.id, on_event=on_event
            )
        finally:
            connections.close_all()  # the thread's own connection, or the test DB stays in use

    turn = threading.Thread(target=run)
    turn.start()
    try:
        assert asked.wait(10)
        url = f"/api/sessions/asks/approvals/{requests[0]['call_id']}/"
        answer = answer_of(api.post(url, {"allow": True}, format="json"), 200)
    finally:
        turn.join(10)
    assert_documented(out.ApprovalOutput, answer)
