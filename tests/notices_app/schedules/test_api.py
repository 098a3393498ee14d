"""GET/POST /api/schedules/ and DELETE /api/schedules/{id}/: a user sees and cancels only
their own schedules; bad input is a 400 with {code, detail} and changes nothing."""

from datetime import timedelta

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from notices_app.models import Schedule
from sessions_app.services import sessions

from .conftest import ready_tasks

pytestmark = pytest.mark.django_db(transaction=True)


def test_create_list_and_cancel(backend, api, alice):
    sessions.session_create(owner_id=alice.id, session_id="chat-1")
    at = (timezone.now() + timedelta(hours=1)).replace(microsecond=0)
    created = api.post(
        "/api/schedules/",
        {"text": "stretch", "run_at": at.isoformat(), "session_id": "chat-1"},
        format="json",
    )
    assert created.status_code == 201, created.json()
    body = created.json()
    assert body["kind"] == "reminder"
    assert body["state"] == "active"
    assert body["session_id"] == "chat-1"
    assert body["next_run_at"] == body["first_run_at"] == at.isoformat()
    assert (body["every"], body["unit"]) == (None, None)

    repeating = api.post(
        "/api/schedules/",
        {"text": "what is 6*7", "kind": "prompt", "in_seconds": 60, "every": 2, "unit": "hours"},
        format="json",
    ).json()
    assert (repeating["kind"], repeating["every"], repeating["unit"]) == ("prompt", 2, "hours")

    listed = api.get("/api/schedules/").json()["schedules"]
    assert [s["id"] for s in listed] == [repeating["id"], body["id"]]  # next run first

    cancelled = api.delete(f"/api/schedules/{body['id']}/")
    assert cancelled.status_code == 200
    assert cancelled.json()["state"] == "cancelled"
    assert [s["id"] for s in api.get("/api/schedules/").json()["schedules"]] == [repeating["id"]]
    everything = api.get("/api/schedules/?state=all").json()["schedules"]
    assert {s["id"]: s["state"] for s in everything} == {
        repeating["id"]: "active",
        body["id"]: "cancelled",
    }
    assert len(ready_tasks("fire_schedule")) == 1


def test_another_users_schedule_is_a_404_and_stays(api, bob_api, alice):
    schedule = api.post("/api/schedules/", {"text": "x", "in_seconds": 60}, format="json").json()
    assert bob_api.get("/api/schedules/").json() == {"schedules": [], "next_offset": None}
    response = bob_api.delete(f"/api/schedules/{schedule['id']}/")
    assert response.status_code == 404
    assert response.json() == {"code": "not_found", "detail": "no such schedule"}
    assert api.delete("/api/schedules/999999/").status_code == 404
    assert api.delete("/api/schedules/abc/").status_code == 404
    assert Schedule.objects.get().state == "active"


def test_a_schedule_cannot_name_another_users_session(api, bob_api, bob):
    sessions.session_create(owner_id=bob.id, session_id="bobs")
    response = api.post(
        "/api/schedules/", {"text": "x", "in_seconds": 60, "session_id": "bobs"}, format="json"
    )
    assert response.status_code == 404
    assert response.json()["code"] == "not_found"
    assert not Schedule.objects.exists()


@pytest.mark.parametrize(
    "body, field",
    [
        ({"in_seconds": 60}, "text"),
        ({"text": "x"}, "run_at or in_seconds"),
        ({"text": "x", "run_at": "2001-01-01T00:00:00Z"}, "in the past"),
        ({"text": "x", "run_at": "tomorrow"}, "run_at"),
        ({"text": "x", "in_seconds": -1}, "in_seconds"),
        ({"text": "x", "in_seconds": 60, "every": 2, "unit": "weeks"}, "unit"),
        ({"text": "x", "in_seconds": 60, "kind": "shout"}, "kind"),
        ({"text": "x", "in_seconds": 60, "session_id": ".hidden"}, "session id"),
        ({"text": "a\x00b", "in_seconds": 60}, "text"),
    ],
)
def test_bad_input_is_a_400_and_changes_nothing(api, body, field):
    response = api.post("/api/schedules/", body, format="json")
    assert response.status_code == 400, response.json()
    assert response.json()["code"] in {"invalid", "bad_id"}
    assert field in response.json()["detail"]
    assert not Schedule.objects.exists()


def test_anonymous_callers_are_refused():
    assert APIClient().get("/api/schedules/").status_code == 401


@pytest.mark.parametrize(
    "query, field",
    [
        ("offset=9223372036854775808", "offset"),
        ("offset=1000000001", "offset"),
        ("offset=-1", "offset"),
        ("limit=9223372036854775808", "limit"),
        ("limit=0", "limit"),
    ],
)
def test_a_page_past_what_a_database_can_count_is_a_400(api, query, field):
    response = api.get(f"/api/schedules/?{query}")
    assert response.status_code == 400, response.content
    assert response.json()["code"] == "invalid"
    assert field in response.json()["detail"]


def test_the_largest_offset_allowed_is_an_empty_last_page(api):
    api.post("/api/schedules/", {"text": "x", "in_seconds": 60}, format="json")
    response = api.get("/api/schedules/?offset=1000000000")
    assert response.json() == {"schedules": [], "next_offset": None}
