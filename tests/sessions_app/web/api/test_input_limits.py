"""The input limits over HTTP (both store backends): bad input is a 400 that changes nothing,
and every error under /api/ — 400, 404, 405, 413, 500 — is JSON with a `code`."""

import json

import pytest
from django.conf import settings
from django.test import Client

from sessions_app import selectors
from sessions_app.core import limits
from sessions_app.store import get_store

pytestmark = pytest.mark.django_db


def assert_error(response, status, code):
    assert response.status_code == status, response.content
    assert response["Content-Type"].startswith("application/json"), response.content[:200]
    body = response.json()
    assert body["code"] == code, body
    assert isinstance(body["detail"], str) and body["detail"]


def post_json(client, path, raw: str, **extra):
    return client.generic("POST", path, raw, content_type="application/json", **extra)


@pytest.fixture
def session(api):
    assert api.post("/api/sessions/", {"id": "s1"}, format="json").status_code == 201
    return "s1"


# --- prompts ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    ["x" * (limits.PROMPT_MAX_CHARS + 1), "y" * 1_000_000, "", "   \n ", "before\x00after"],
    ids=["100001 chars", "1 MB", "empty", "blank", "NUL"],
)
def test_a_prompt_outside_the_limits_is_400_and_runs_no_turn(api, session, text):
    response = api.post(f"/api/sessions/{session}/messages/", {"text": text}, format="json")
    assert_error(response, 400, "invalid")
    assert get_store().get_meta(session).last_seq == 0


def test_a_prompt_of_exactly_the_limit_runs(api, session):
    text = "z" * limits.PROMPT_MAX_CHARS
    response = api.post(f"/api/sessions/{session}/messages/", {"text": text}, format="json")
    assert response.status_code == 200, response.content[:300]
    assert response.json()["status"] == "completed"
    users = [e for e in get_store().get_messages(session) if e.role == "user"]
    assert [len(e.content) for e in users] == [limits.PROMPT_MAX_CHARS]


# --- titles, agents, notices ----------------------------------------------------------------


def test_titles_and_agents_are_bounded_and_nul_free(api):
    for body in (
        {"id": "t1", "title": "t" * (limits.TITLE_MAX_CHARS + 1)},
        {"id": "t1", "title": "a\x00b"},
        {"id": "t1", "agent": "a\x00b"},
        {"id": "t1", "agent": "a" * (limits.AGENT_MAX_CHARS + 1)},
    ):
        assert_error(api.post("/api/sessions/", body, format="json"), 400, "invalid")
    assert get_store().get_meta("t1") is None
    created = api.post(
        "/api/sessions/", {"id": "t1", "title": "t" * limits.TITLE_MAX_CHARS}, format="json"
    )
    assert created.status_code == 201
    assert_error(api.get("/api/sessions/?agent=a%00b"), 400, "invalid")


def test_notices_are_bounded_and_nul_free(api, session):
    path = f"/api/sessions/{session}/proactive/"
    for body in (
        {"message_id": "m1", "content": "n" * (limits.NOTICE_MAX_CHARS + 1)},
        {"message_id": "m1", "content": "2 MB " * 400_000},
        {"message_id": "m1", "content": "a\x00b"},
        {"message_id": "m\x001", "content": "fine"},
    ):
        assert_error(api.post(path, body, format="json"), 400, "invalid")
    assert api.get(path).json() == []
    body = {"message_id": "m1", "content": "n" * limits.NOTICE_MAX_CHARS}
    assert api.post(path, body, format="json").status_code == 201


# --- sequence numbers ---------------------------------------------------------------------


def test_after_seq_and_at_seq_are_bounded_to_64_bits(api, session):
    entries = f"/api/sessions/{session}/entries/"
    assert_error(api.get(f"{entries}?after_seq={2**63}"), 400, "invalid")
    assert_error(api.get(f"{entries}?after_seq={10**30}"), 400, "invalid")
    largest = api.get(f"{entries}?after_seq={limits.SEQ_MAX}")
    assert largest.status_code == 200 and largest.json()["entries"] == []
    branch = api.post(f"/api/sessions/{session}/branch/", {"at_seq": 2**63}, format="json")
    assert_error(branch, 400, "invalid")


# --- JSON bodies ----------------------------------------------------------------------------


def test_deeply_nested_json_is_bad_request_not_a_crash(api, session):
    path = f"/api/sessions/{session}/messages/"
    for depth in (limits.JSON_MAX_DEPTH + 1, 100_000):
        raw = '{"text": ' + "[" * depth + "]" * depth + "}"
        assert_error(post_json(api, path, raw), 400, "bad_request")
    shallow = '{"text": "a [[[ ]]] {{ in a string", "extra": ' + "[" * 50 + "]" * 50 + "}"
    assert post_json(api, path, shallow).status_code == 200


def test_a_body_over_the_upload_limit_is_413_json(api, session):
    oversized = settings.DATA_UPLOAD_MAX_MEMORY_SIZE + 1
    raw = json.dumps({"text": "w" * oversized})
    response = post_json(api, f"/api/sessions/{session}/messages/", raw)
    assert_error(response, 413, "too_large")
    form = api.generic(
        "POST",
        f"/api/sessions/{session}/messages/",
        "text=" + "w" * oversized,
        content_type="application/x-www-form-urlencoded",
    )
    assert_error(form, 413, "too_large")
    assert get_store().get_meta(session).last_seq == 0


# --- errors outside DRF's views -------------------------------------------------------------


def test_unknown_api_paths_and_methods_answer_json(api, session):
    assert_error(api.get("/api/nothing-here/"), 404, "not_found")
    assert_error(api.get(f"/api/sessions/{session}/nothing-here/"), 404, "not_found")
    assert_error(Client().get("/api/nothing-here/"), 404, "not_found")
    response = api.put(f"/api/sessions/{session}/", {}, format="json")
    assert_error(response, 405, "method_not_allowed")
    assert "GET" in response["Allow"]


def test_a_server_error_under_api_is_json(alice, session, monkeypatch):
    def broken(**kwargs):
        raise RuntimeError("a bug")

    monkeypatch.setattr(selectors, "session_detail", broken)
    client = Client(raise_request_exception=False)
    client.force_login(alice)
    assert_error(client.get(f"/api/sessions/{session}/"), 500, "server_error")
