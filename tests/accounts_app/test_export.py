"""`GET /api/me/export/` and `export_user_data` (docs/design.md §21): a streamed zip of every
session of the caller (JSON and Markdown), memory facts and schedules — nothing of anyone
else."""

import io
import json
import zipfile

import pytest
from django.core.management import call_command
from django.http import StreamingHttpResponse

from memory_app.services import memory_consolidate
from notices_app.services.schedules import schedule_create
from sessions_app.core.throttles import ExportRateThrottle
from sessions_app.runtime.turn.turns import turn_run
from sessions_app.services import sessions as session_services

pytestmark = pytest.mark.django_db


def _chat(owner, session_id, text):
    session_services.session_create(session_id=session_id, owner_id=owner.id)
    turn_run(session_id=session_id, text=text)


def test_the_zip_holds_every_session_of_the_caller_and_nothing_of_another_user(
    backend, api, alice, bob
):
    _chat(alice, "trip", "My name is Sam. what is 2+2")
    _chat(alice, "test-scratch", "hello")
    _chat(alice, "a.1", "first")
    _chat(alice, "a_1", "second")  # the same file name as a.1: both are kept
    memory_consolidate(session_id="trip")
    schedule_create(owner_id=alice.id, text="stretch", in_seconds=600)
    _chat(bob, "bob-secret", "bob's private words")
    schedule_create(owner_id=bob.id, text="bob's reminder", in_seconds=600)

    response = api.get("/api/me/export/")

    assert response.status_code == 200
    assert isinstance(response, StreamingHttpResponse)
    assert response["Content-Type"] == "application/zip"
    assert "attachment" in response["Content-Disposition"]
    archive = zipfile.ZipFile(io.BytesIO(b"".join(response)))
    names = set(archive.namelist())
    sessions = {"trip", "test-scratch", "a_1", "a_1-2"}
    assert {f"sessions/{name}.json" for name in sessions} <= names
    assert {f"sessions/{name}.md" for name in sessions} <= names
    exported_ids = {
        json.loads(archive.read(f"sessions/{name}.json"))["session"]["id"] for name in sessions
    }
    assert exported_ids == {"trip", "test-scratch", "a.1", "a_1"}
    trip = json.loads(archive.read("sessions/trip.json"))
    assert [e["content"] for e in trip["entries"] if e["role"] == "user"] == [
        "My name is Sam. what is 2+2"
    ]
    assert "My name is Sam" in archive.read("sessions/trip.md").decode()
    memory = json.loads(archive.read("memory.json"))
    assert any("Sam" in fact["text"] for fact in memory["profile_facts"])
    assert [s["text"] for s in json.loads(archive.read("schedules.json"))] == ["stretch"]
    everything = b"".join(archive.read(name) for name in names)
    assert b"bob" not in everything


def test_the_operators_command_writes_the_same_zip(alice, tmp_path):
    _chat(alice, "trip", "hello")
    target = tmp_path / "alice.zip"
    call_command("export_user_data", "--user", "alice", str(target), stdout=io.StringIO())
    names = zipfile.ZipFile(target).namelist()
    assert "sessions/trip.json" in names and "sessions/trip.md" in names


def test_the_export_needs_a_login(client):
    assert client.get("/api/me/export/").status_code in (401, 403)


def test_exports_are_throttled_per_user(api, bob_api, monkeypatch):
    # DRF reads the rates when it loads; this stands for EXPORT_THROTTLE_RATE=2/hour.
    monkeypatch.setattr(ExportRateThrottle, "THROTTLE_RATES", {"exports": "2/hour"})
    for _ in range(2):
        assert api.get("/api/me/export/").status_code == 200

    refused = api.get("/api/me/export/")

    assert (refused.status_code, refused.json()["code"]) == (429, "throttled")
    assert "Retry-After" in refused.headers
    assert bob_api.get("/api/me/export/").status_code == 200
