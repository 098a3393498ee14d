"""docs/design.md §7, row by row: what a client of the HTTP API sees (both store backends)."""

import json
import re

import pytest
from django.conf import settings
from rest_framework.test import APIClient

from sessions_app.services import connections as connection_services
from sessions_app.services import deletion, sessions
from sessions_app.store import connections, get_store
from tests.builders import turn_entries

pytestmark = pytest.mark.django_db


def a_turn(session_id, question="What is 6*7?", answer="42"):
    """One finished turn with a tool call, stored the way the runtime stores it."""
    entries = turn_entries(
        question,
        answer,
        tools=[("calculator", {"expr": "6*7"}, "42")],
        usage={"input_tokens": 10, "output_tokens": 2},
    )
    return get_store().append(session_id, entries)


def assert_error(response, status, code):
    assert response.status_code == status, response.content
    body = response.json()
    assert body["code"] == code, body
    assert isinstance(body["detail"], str) and body["detail"]


# --- POST /api/sessions/ --------------------------------------------------------------------


def test_create_returns_201_then_200_for_the_same_id(api):
    first = api.post("/api/sessions/", {"id": "work:1", "title": "Taxes"}, format="json")
    assert first.status_code == 201
    assert first.json()["id"] == "work:1"
    assert first.json()["agent"] == "jarvis"
    assert first.json()["title"] == "Taxes"
    assert first.json()["parent_id"] is None
    again = api.post("/api/sessions/", {"id": "work:1"}, format="json")
    assert again.status_code == 200
    assert again.json()["title"] == "Taxes"


def test_create_without_id_makes_a_time_ordered_one(api):
    first = api.post("/api/sessions/", {}, format="json").json()["id"]
    second = api.post("/api/sessions/", {}, format="json").json()["id"]
    assert first < second


def test_create_with_another_agent_is_409_agent_mismatch(api):
    api.post("/api/sessions/", {"id": "s1", "agent": "jarvis"}, format="json")
    response = api.post("/api/sessions/", {"id": "s1", "agent": "coder"}, format="json")
    assert_error(response, 409, "agent_mismatch")


def test_create_of_another_users_id_is_409_id_unavailable(api, bob_api, bob):
    bob_api.post("/api/sessions/", {"id": "bobs"}, format="json")
    response = api.post("/api/sessions/", {"id": "bobs"}, format="json")
    assert_error(response, 409, "id_unavailable")
    assert get_store().get_meta("bobs").owner_id == bob.id


@pytest.mark.parametrize("bad_id", ["", ".hidden", "a/b", "sp ace", "x" * 201, "ü"])
def test_create_with_a_bad_id_is_400(api, bad_id):
    response = api.post("/api/sessions/", {"id": bad_id}, format="json")
    assert response.status_code == 400
    assert response.json()["code"] in {"bad_id", "invalid"}


# --- GET /api/sessions/ ---------------------------------------------------------------------


def test_list_shows_only_my_sessions_newest_activity_first(api, bob_api):
    api.post("/api/sessions/", {"id": "older"}, format="json")
    api.post("/api/sessions/", {"id": "newer"}, format="json")
    bob_api.post("/api/sessions/", {"id": "bobs"}, format="json")
    a_turn("older")  # activity moves it to the top
    ids = [row["id"] for row in api.get("/api/sessions/").json()]
    assert ids == ["older", "newer"]
    assert [row["id"] for row in bob_api.get("/api/sessions/").json()] == ["bobs"]


def test_list_filters_by_agent_and_test_sessions_and_shows_parents(api):
    api.post("/api/sessions/", {"id": "main"}, format="json")
    api.post("/api/sessions/", {"id": "test-probe"}, format="json")
    api.post("/api/sessions/", {"id": "code", "agent": "librarian"}, format="json")
    api.post("/api/sessions/main/branch/", {"id": "main-b"}, format="json")
    rows = {row["id"]: row for row in api.get("/api/sessions/").json()}
    assert rows["main-b"]["parent_id"] == "main"
    assert set(rows) == {"main", "test-probe", "code", "main-b"}
    no_tests = api.get("/api/sessions/?include_tests=false").json()
    assert "test-probe" not in {row["id"] for row in no_tests}
    assert [row["id"] for row in api.get("/api/sessions/?agent=librarian").json()] == ["code"]


# --- GET /api/sessions/{id}/ ----------------------------------------------------------------


def test_detail_has_meta_and_entry_counts(api):
    api.post("/api/sessions/", {"id": "s1"}, format="json")
    a_turn("s1")
    body = api.get("/api/sessions/s1/").json()
    assert body["id"] == "s1"
    assert body["last_seq"] == 6
    assert body["entry_counts"]["total"] == 6
    assert body["entry_counts"]["message"] == 4
    assert body["entry_counts"]["message.user"] == 1
    assert body["entry_counts"]["turn_end"] == 1
    for field in ("agent", "title", "parent_id", "branched_at_seq", "created_at", "updated_at"):
        assert field in body


def test_another_users_session_is_404_everywhere(api, bob_api):
    bob_api.post("/api/sessions/", {"id": "bobs"}, format="json")
    a_turn("bobs")
    for path in ("", "entries/", "export/?format=md", "cost/", "proactive/"):
        assert_error(api.get(f"/api/sessions/bobs/{path}"), 404, "not_found")
    for action in ("branch/", "abort/", "compact/"):
        assert_error(api.post(f"/api/sessions/bobs/{action}", {}, format="json"), 404, "not_found")
    # A delete answers exactly as for a free id: it tells nobody which ids exist.
    for taken_or_free in ("bobs", "nobody-has-this"):
        response = api.delete(f"/api/sessions/{taken_or_free}/")
        assert (response.status_code, response.json()) == (200, {"deleted": False, "exports": []})
    assert get_store().get_meta("bobs") is not None
    assert_error(api.get("/api/sessions/nobody-has-this/"), 404, "not_found")


def test_a_bad_id_in_the_url_is_400(api):
    assert_error(api.get("/api/sessions/.dot/"), 400, "bad_id")
    assert_error(api.get("/api/sessions/.dot/entries/"), 400, "bad_id")
    assert_error(api.delete("/api/sessions/.dot/"), 400, "bad_id")


# --- GET /api/sessions/{id}/entries/ --------------------------------------------------------


def test_entries_come_in_seq_order_and_page_with_next_after_seq(api):
    api.post("/api/sessions/", {"id": "s1"}, format="json")
    a_turn("s1")
    body = api.get("/api/sessions/s1/entries/").json()
    assert [entry["seq"] for entry in body["entries"]] == [1, 2, 3, 4, 5, 6]
    assert body["next_after_seq"] == 6
    call = body["entries"][2]["tool_calls"][0]
    assert call["name"] == "calculator" and json.loads(call["arguments"]) == {"expr": "6*7"}
    page = api.get("/api/sessions/s1/entries/?after_seq=2&limit=2").json()
    assert [entry["seq"] for entry in page["entries"]] == [3, 4]
    assert page["next_after_seq"] == 4
    rest = api.get(f"/api/sessions/s1/entries/?after_seq={page['next_after_seq']}").json()
    assert [entry["seq"] for entry in rest["entries"]] == [5, 6]
    empty = api.get("/api/sessions/s1/entries/?after_seq=6").json()
    assert empty == {"entries": [], "next_after_seq": 6, "next_before_seq": None}
    assert_error(api.get("/api/sessions/s1/entries/?after_seq=-1"), 400, "invalid")


# --- POST /api/sessions/{id}/branch/ --------------------------------------------------------


def test_branch_copies_and_is_independent(api):
    api.post("/api/sessions/", {"id": "s1"}, format="json")
    a_turn("s1")
    response = api.post("/api/sessions/s1/branch/", {}, format="json")
    assert response.status_code == 201
    branch = response.json()
    assert branch["parent_id"] == "s1" and branch["branched_at_seq"] == 6
    copied = api.get(f"/api/sessions/{branch['id']}/entries/").json()["entries"]
    assert [entry["content"] for entry in copied][4] == "42"
    a_turn("s1", question="again?", answer="still 42")
    assert len(api.get(f"/api/sessions/{branch['id']}/entries/").json()["entries"]) == 6


def test_branch_at_seq_with_a_chosen_id(api):
    api.post("/api/sessions/", {"id": "s1"}, format="json")
    a_turn("s1")
    response = api.post("/api/sessions/s1/branch/", {"id": "s1:alt", "at_seq": 2}, format="json")
    assert response.status_code == 201
    entries = api.get("/api/sessions/s1:alt/entries/").json()["entries"]
    # The cut fell inside the turn: the copy closes it so it stays a valid history.
    assert [entry["seq"] for entry in entries][:2] == [1, 2]
    assert entries[-2]["kind"] == "turn_end"
    assert entries[-2]["data"]["status"] == "interrupted"
    # What the rest of the turn did is told after it (docs/design.md §20).
    assert entries[-1]["kind"] == "branch_summary"


def test_a_branch_cut_after_a_tool_call_answers_it_and_closes_the_turn(api):
    api.post("/api/sessions/", {"id": "s1"}, format="json")
    a_turn("s1")
    response = api.post("/api/sessions/s1/branch/", {"id": "s1-cut", "at_seq": 3}, format="json")
    assert response.status_code == 201
    assert response.json()["last_seq"] == 6
    copied = api.get("/api/sessions/s1-cut/entries/").json()["entries"]
    assert [(entry["kind"], entry["role"]) for entry in copied] == [
        ("turn_start", ""),
        ("message", "user"),
        ("message", "assistant"),
        ("message", "tool"),
        ("turn_end", ""),
        ("branch_summary", ""),
    ]
    assert copied[3]["tool_call_id"] == copied[2]["tool_calls"][0]["id"] and copied[3]["is_error"]
    assert copied[3]["content"] == sessions.BRANCH_RESULT_TEXT
    assert copied[4]["data"]["status"] == "interrupted"
    assert len(api.get("/api/sessions/s1/entries/").json()["entries"]) == 6  # source untouched
    context = api.get("/api/sessions/s1-cut/context/").json()
    assert context["messages"][-1]["role"] == "tool"  # a history a model accepts


def test_branch_errors(api, bob_api):
    api.post("/api/sessions/", {"id": "s1"}, format="json")
    bob_api.post("/api/sessions/", {"id": "bobs"}, format="json")
    a_turn("s1")
    assert_error(
        api.post("/api/sessions/s1/branch/", {"id": "bobs"}, format="json"), 409, "id_unavailable"
    )
    assert_error(
        api.post("/api/sessions/s1/branch/", {"at_seq": 99}, format="json"), 400, "invalid"
    )
    assert_error(api.post("/api/sessions/s1/branch/", {"id": ".x"}, format="json"), 400, "bad_id")
    assert_error(api.post("/api/sessions/missing/branch/", {}, format="json"), 404, "not_found")


# --- DELETE /api/sessions/{id}/ -------------------------------------------------------------


def test_delete_removes_history_and_missing_is_200_false(api):
    api.post("/api/sessions/", {"id": "s1"}, format="json")
    a_turn("s1")
    api.post("/api/sessions/s1/proactive/", {"message_id": "m1", "content": "hi"}, format="json")
    response = api.delete("/api/sessions/s1/")
    assert response.status_code == 200 and response.json() == {"deleted": True, "exports": []}
    assert get_store().get_meta("s1") is None
    assert get_store().get_messages("s1") == []
    assert get_store().get_proactive("s1") == []
    assert api.get("/api/sessions/s1/").status_code == 404
    again = api.delete("/api/sessions/s1/")
    assert again.status_code == 200 and again.json() == {"deleted": False, "exports": []}


def test_delete_while_a_websocket_is_attached_is_409(api, alice):
    api.post("/api/sessions/", {"id": "s1"}, format="json")
    a_turn("s1")
    connection_services.connection_open(session_id="s1", channel_name="chan-1", user_id=alice.id)
    assert_error(api.delete("/api/sessions/s1/"), 409, "session_connected")
    assert len(get_store().get_messages("s1")) == 6
    connection_services.connection_close(channel_name="chan-1")
    assert api.delete("/api/sessions/s1/").json() == {"deleted": True, "exports": []}


def test_a_connection_whose_heartbeat_stopped_does_not_block_delete(api, alice, monkeypatch):
    api.post("/api/sessions/", {"id": "s1"}, format="json")
    connection_services.connection_open(session_id="s1", channel_name="chan-dead", user_id=alice.id)
    monkeypatch.setattr(connections, "LIVE_TIMEOUT_SEC", -1)  # every heartbeat is now too old
    assert api.delete("/api/sessions/s1/").json() == {"deleted": True, "exports": []}


def test_delete_leaves_branches_standing(api):
    api.post("/api/sessions/", {"id": "s1"}, format="json")
    a_turn("s1")
    api.post("/api/sessions/s1/branch/", {"id": "s1-b"}, format="json")
    api.delete("/api/sessions/s1/")
    assert len(api.get("/api/sessions/s1-b/entries/").json()["entries"]) == 6


# --- GET /api/sessions/{id}/export/ ---------------------------------------------------------


def test_export_markdown_is_a_readable_download_also_written_to_exports_dir(api, alice):
    api.post("/api/sessions/", {"id": "work:1"}, format="json")
    a_turn("work:1")
    response = api.get("/api/sessions/work:1/export/?format=md")
    assert response.status_code == 200
    assert response["Content-Disposition"] == 'attachment; filename="work_1.md"'
    text = response.content.decode()
    assert "User" in text and "What is 6*7?" in text
    assert "Tool call" in text and "calculator" in text
    assert "Tool result" in text and "42" in text
    assert "completed" in text
    assert (settings.EXPORTS_DIR / str(alice.id) / "work_1.md").read_text() == text


def test_export_json_has_every_entry_with_every_field(api, alice):
    api.post("/api/sessions/", {"id": "work:1"}, format="json")
    stored = a_turn("work:1")
    response = api.get("/api/sessions/work:1/export/?format=json")
    assert response["Content-Disposition"] == 'attachment; filename="work_1.json"'
    body = json.loads(response.content)
    assert body["session"]["id"] == "work:1"
    assert body["entries"] == [record.to_dict() for record in stored]
    assert json.loads((settings.EXPORTS_DIR / str(alice.id) / "work_1.json").read_text()) == body
    assert_error(api.get("/api/sessions/work:1/export/?format=pdf"), 400, "invalid")


# --- /api/sessions/{id}/proactive/ ----------------------------------------------------------


def test_proactive_add_once_per_message_id(api):
    api.post("/api/sessions/", {"id": "s1"}, format="json")
    first = api.post(
        "/api/sessions/s1/proactive/", {"message_id": "m1", "content": "Stand up!"}, format="json"
    )
    assert first.status_code == 201 and first.json()["content"] == "Stand up!"
    again = api.post(
        "/api/sessions/s1/proactive/", {"message_id": "m1", "content": "other"}, format="json"
    )
    assert again.status_code == 200 and again.json()["content"] == "Stand up!"
    listed = api.get("/api/sessions/s1/proactive/").json()
    assert [notice["message_id"] for notice in listed] == ["m1"]
    assert_error(api.post("/api/sessions/s1/proactive/", {}, format="json"), 400, "invalid")


# --- authentication -------------------------------------------------------------------------


def test_no_credentials_is_401_with_code(backend, db):
    response = APIClient().get("/api/sessions/")
    assert_error(response, 401, "not_authenticated")
    assert response["WWW-Authenticate"] == "Token"


def test_a_bad_token_is_401(backend, db):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION="Token nope")
    assert_error(client.get("/api/sessions/"), 401, "authentication_failed")


def test_browser_session_reads_but_writes_need_the_csrf_token(alice, backend):
    client = APIClient(enforce_csrf_checks=True)
    client.login(username="alice", password="pw-alice")
    assert client.get("/api/sessions/").status_code == 200
    assert_error(
        client.post("/api/sessions/", {"id": "s1"}, format="json"), 403, "permission_denied"
    )
    page = client.get("/")  # the chat page sets the CSRF cookie
    assert page.status_code == 200
    token = client.cookies["csrftoken"].value
    created = client.post("/api/sessions/", {"id": "s1"}, format="json", HTTP_X_CSRFTOKEN=token)
    assert created.status_code == 201


def test_schema_and_docs_are_served_with_local_assets(client, db):
    schema = client.get("/api/schema/")
    assert schema.status_code == 200
    assert b"/api/sessions/{id}/branch/" in schema.content
    docs = client.get("/api/docs/")
    assert docs.status_code == 200
    assert b"/static/drf_spectacular_sidecar/" in docs.content
    # Every asset the page loads is this server's: no address with a scheme or "//" host.
    # (Not a search for "cdn": the page carries a random CSRF token that may spell it.)
    assets = re.findall(rb'(?:src|href)\s*=\s*["\']([^"\']+)', docs.content)
    assert assets
    assert [url for url in assets if re.match(rb"(?:[a-z][a-z0-9+.-]*:)?//", url, re.I)] == []


# --- turns: messages, abort, context, cost, compact ------------------------------------------


def test_a_message_runs_a_turn_and_returns_its_entries(api):
    api.post("/api/sessions/", {"id": "s1"}, format="json")
    response = api.post("/api/sessions/s1/messages/", {"text": "what is 6*7?"}, format="json")
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["status"] == "completed"
    kinds = [(entry["kind"], entry["role"]) for entry in body["entries"]]
    assert kinds[0] == ("turn_start", "") and kinds[-1] == ("turn_end", "")
    assert ("message", "tool") in kinds
    answer = [e for e in body["entries"] if e["role"] == "assistant" and e["content"]][-1]
    assert "42" in answer["content"]
    stored = api.get("/api/sessions/s1/entries/").json()["entries"]
    assert [entry["seq"] for entry in stored] == [entry["seq"] for entry in body["entries"]]


def test_message_errors(api, bob_api):
    api.post("/api/sessions/", {"id": "s1"}, format="json")
    bob_api.post("/api/sessions/", {"id": "bobs"}, format="json")
    assert_error(
        api.post("/api/sessions/s1/messages/", {"text": ""}, format="json"), 400, "invalid"
    )
    assert_error(
        api.post("/api/sessions/bobs/messages/", {"text": "hi"}, format="json"), 404, "not_found"
    )
    assert_error(
        api.post("/api/sessions/nope/messages/", {"text": "hi"}, format="json"), 404, "not_found"
    )


def test_a_message_while_a_turn_runs_is_409_session_busy(api, settings):
    from sessions_app.runtime.turn.lease import lease_acquire

    settings.BUSY_GRACE_SEC = 0.2
    api.post("/api/sessions/", {"id": "s1"}, format="json")
    lease = lease_acquire(session_id="s1", wait_sec=1)  # a turn of another worker
    try:
        response = api.post("/api/sessions/s1/messages/", {"text": "hi"}, format="json")
    finally:
        lease.release()
    assert_error(response, 409, "session_busy")
    assert response.json()["detail"] == "the previous request is still being processed"


def test_turns_are_throttled_per_user(api, monkeypatch):
    from sessions_app.web.api import TurnRateThrottle

    # The rate is read from settings when DRF loads; this stands for TURN_THROTTLE_RATE=2/min.
    monkeypatch.setattr(TurnRateThrottle, "THROTTLE_RATES", {"turns": "2/min"})
    api.post("/api/sessions/", {"id": "s1"}, format="json")
    for _ in range(2):
        assert (
            api.post("/api/sessions/s1/messages/", {"text": "hi"}, format="json").status_code == 200
        )
    assert_error(
        api.post("/api/sessions/s1/messages/", {"text": "hi"}, format="json"), 429, "throttled"
    )
    assert api.get("/api/sessions/s1/entries/").status_code == 200  # only turns are limited


def test_abort_with_no_turn_running(api):
    api.post("/api/sessions/", {"id": "s1"}, format="json")
    response = api.post("/api/sessions/s1/abort/")
    assert response.status_code == 200 and response.json() == {"aborted": False}
    assert_error(api.post("/api/sessions/nope/abort/"), 404, "not_found")


def test_context_is_the_validated_projection_per_provider(api):
    api.post("/api/sessions/", {"id": "s1"}, format="json")
    a_turn("s1")
    openai = api.get("/api/sessions/s1/context/?format=openai").json()
    assert openai["format"] == "openai"
    assert openai["messages"][0]["role"] == "system"
    roles = [message["role"] for message in openai["messages"]]
    assert roles == ["system", "user", "assistant", "tool", "assistant"]
    assert openai["messages"][3]["tool_call_id"] == openai["messages"][2]["tool_calls"][0]["id"]
    anthropic = api.get("/api/sessions/s1/context/?format=anthropic").json()
    assert anthropic["format"] == "anthropic" and anthropic["system"]
    assert [message["role"] for message in anthropic["messages"]] == [
        "user",
        "assistant",
        "user",
        "assistant",
    ]
    assert anthropic["messages"][2]["content"][0]["type"] == "tool_result"
    assert_error(api.get("/api/sessions/s1/context/?format=gemini"), 400, "invalid")


def test_context_tells_how_much_of_the_models_window_it_takes(api):
    api.post("/api/sessions/", {"id": "s1"}, format="json")
    api.patch("/api/sessions/s1/", {"model": "openai:gpt-4o"}, format="json")
    a_turn("s1")
    small = api.get("/api/sessions/s1/context/?format=openai").json()["tokens"]
    assert small["window"] == 128000 and small["reserve"] == 16384
    assert 0 < small["used"] < 1000
    get_store().append("s1", turn_entries("word " * 20_000, "Noted.", turn="long"))
    a_turn("s1", "And now?", "Still here.")
    grown = api.get("/api/sessions/s1/context/?format=anthropic").json()["tokens"]
    assert grown["used"] > small["used"] + 15_000
    # Compacted, the long request gives way to its summary line.
    assert api.post("/api/sessions/s1/compact/").status_code == 201
    compacted = api.get("/api/sessions/s1/context/?format=openai").json()["tokens"]
    assert compacted["used"] < grown["used"] // 4
    # What the page's meter asks for: the count alone, without the messages.
    meter = api.get("/api/sessions/s1/context/?tokens_only=true").json()
    assert meter == {"format": "openai", "tokens": compacted}


def test_cost_per_model_and_total(api):
    api.post("/api/sessions/", {"id": "s1"}, format="json")
    a_turn("s1")
    body = api.get("/api/sessions/s1/cost/").json()
    assert body["total"]["input_tokens"] >= 10 and body["total"]["output_tokens"] >= 2
    assert [row["model"] for row in body["models"]] == ["offline"]


def test_compact_summarizes_older_turns(api):
    api.post("/api/sessions/", {"id": "s1"}, format="json")
    assert_error(api.post("/api/sessions/s1/compact/"), 409, "nothing_to_compact")
    a_turn("s1")
    a_turn("s1", question="and 7*8?", answer="56")
    response = api.post("/api/sessions/s1/compact/")
    assert response.status_code == 201
    assert response.json()["kind"] == "compaction"
    assert response.json()["data"]["summary"]
    context = api.get("/api/sessions/s1/context/?format=openai").json()["messages"]
    assert "What is 6*7?" not in [message.get("content") for message in context]


def test_a_failing_session_deleted_receiver_leaves_the_session_in_place(api, alice):
    from sessions_app.core.signals import session_deleted

    def refuse(sender, **kwargs):
        raise RuntimeError("memory purge failed")

    api.post("/api/sessions/", {"id": "s1"}, format="json")
    a_turn("s1")
    session_deleted.connect(refuse)
    try:
        with pytest.raises(RuntimeError):
            deletion.session_delete(session_id="s1", owner_id=alice.id)
    finally:
        session_deleted.disconnect(refuse)
    assert len(get_store().get_messages("s1")) == 6
    assert api.get("/api/sessions/s1/").status_code == 200
