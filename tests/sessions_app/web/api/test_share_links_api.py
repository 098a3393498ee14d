"""Share links (docs/design.md §24): a share shows the conversation up to its seq and nothing
after, to anyone with the link and no account; never thinking, tool calls only when asked,
nothing else of the owner's; revoked, expired and unknown links are one and the same 404; a
signed-in reader's copy becomes their own session."""

from datetime import timedelta

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from sessions_app.core.throttles import ShareRateThrottle
from sessions_app.models import ShareLink
from sessions_app.store import NewEntry, get_store
from tests.builders import turn_entries

pytestmark = pytest.mark.django_db

SECRET_THOUGHT = "the user seems tired, keep it short"
ANSWER_FIELDS = {"title", "upto_seq", "include_tools", "shared_at", "entries"}
ENTRY_FIELDS = {"seq", "role", "content", "created_at"}
TOOL_FIELDS = ENTRY_FIELDS | {"tool_calls", "tool_call_id", "name", "is_error"}


def a_conversation(owner_id, session_id="trip"):
    store = get_store()
    store.create(session_id, owner_id=owner_id, title="Trip to Lisbon")
    store.append(session_id, turn_entries("Plan a day in Lisbon", "", turn="t1")[:-1])
    store.append(
        session_id,
        [
            NewEntry(
                role="assistant",
                content="Start at **Belém**, then the *tram 28*.",
                turn_id="t1",
                model="gpt-4o",
                usage={"input_tokens": 10, "output_tokens": 5},
                data={"reasoning": [{"type": "thinking", "thinking": SECRET_THOUGHT}]},
            ),
            NewEntry(kind="turn_end", turn_id="t1", data={"status": "completed", "error": ""}),
        ],
    )
    store.append(
        session_id,
        turn_entries(
            "How far is Sintra?",
            "About 40 minutes by train.",
            tools=[("calculator", {"expression": "25*1.6"}, "40")],
            thought="Let me work out the distance.",
            turn="t2",
        ),
    )
    return store.get_meta(session_id)


def strings_in(value):
    """Every key and string anywhere in a JSON value."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield key
            yield from strings_in(item)
    elif isinstance(value, list):
        for item in value:
            yield from strings_in(item)
    elif isinstance(value, str):
        yield value


def anonymous():
    return APIClient()


def share(api, session_id="trip", **body):
    response = api.post(f"/api/sessions/{session_id}/shares/", body, format="json")
    assert response.status_code == 201, response.content
    created = response.json()
    assert created["url"].startswith("/s/")
    return created, created["url"].removeprefix("/s/")


def test_a_share_shows_the_conversation_up_to_its_seq_to_anyone(api, alice):
    meta = a_conversation(alice.id)
    # The owner's other data, which nothing of the share may reveal.
    get_store().create("diary", owner_id=alice.id, title="Private diary")
    get_store().append("diary", turn_entries("my secret plans", "noted"))
    branch = api.post("/api/sessions/trip/branch/", {}, format="json").json()

    created, token = share(api)
    assert created["upto_seq"] == meta.last_seq and created["expires_at"] is None
    get_store().append("trip", turn_entries("And tomorrow?", "Cascais beaches.", turn="t3"))

    response = anonymous().get(f"/api/shared/{token}/")
    assert response.status_code == 200, response.content
    shown = response.json()
    assert set(shown) == ANSWER_FIELDS
    assert (shown["title"], shown["upto_seq"], shown["include_tools"]) == (
        "Trip to Lisbon",
        meta.last_seq,
        False,
    )
    assert [(e["role"], e["content"]) for e in shown["entries"]] == [
        ("user", "Plan a day in Lisbon"),
        ("assistant", "Start at **Belém**, then the *tram 28*."),
        ("user", "How far is Sintra?"),
        # What the assistant said before calling a tool is part of the conversation; the
        # call itself is not shown without include_tools.
        ("assistant", "Let me work out the distance."),
        ("assistant", "About 40 minutes by train."),
    ]
    for entry in shown["entries"]:
        assert set(entry) == ENTRY_FIELDS
        assert entry["seq"] <= meta.last_seq
    # Every field of the answer, walked: nothing of the owner's other data, nor the session's
    # own id, its branch, the model's thinking, the tools (not asked for), or who owns it.
    everything = " ".join(strings_in(shown))
    for hidden in (
        "trip",
        "diary",
        "Private diary",
        "my secret plans",
        branch["id"],
        SECRET_THOUGHT,
        "reasoning",
        "calculator",
        "25*1.6",
        "alice",
        "gpt-4o",
        "Cascais",
    ):
        assert hidden not in everything, hidden

    page = anonymous().get(f"/s/{token}")
    assert page.status_code == 200
    html = page.content.decode()
    assert '<meta name="robots" content="noindex' in html
    assert "Plan a day in Lisbon" in html
    assert 'id="composer"' not in html and 'id="sessions"' not in html
    assert "Cascais" not in html and SECRET_THOUGHT not in html and "Private diary" not in html


def test_tool_calls_are_shown_only_when_asked_for(api, alice):
    a_conversation(alice.id)
    _, token = share(api, include_tools=True)
    shown = anonymous().get(f"/api/shared/{token}/").json()
    assert shown["include_tools"] is True
    for entry in shown["entries"]:
        assert set(entry) == TOOL_FIELDS
    calls = [e for e in shown["entries"] if e["tool_calls"]]
    assert [c["name"] for c in calls[0]["tool_calls"]] == ["calculator"]
    assert calls[0]["content"] == "Let me work out the distance."
    results = [e for e in shown["entries"] if e["role"] == "tool"]
    assert [(r["content"], r["tool_call_id"]) for r in results] == [
        ("40", calls[0]["tool_calls"][0]["id"])
    ]
    assert SECRET_THOUGHT not in " ".join(strings_in(shown))


def test_refresh_moves_the_share_to_now_under_the_same_url(api, alice):
    a_conversation(alice.id)
    created, token = share(api)
    get_store().append("trip", turn_entries("And tomorrow?", "Cascais beaches.", turn="t3"))
    refreshed = api.post(f"/api/sessions/trip/shares/{created['id']}/refresh/")
    assert refreshed.status_code == 200, refreshed.content
    assert refreshed.json()["upto_seq"] == get_store().get_meta("trip").last_seq
    assert "url" not in refreshed.json(), "the token is shown once"
    shown = anonymous().get(f"/api/shared/{token}/").json()
    assert shown["entries"][-1]["content"] == "Cascais beaches."
    listed = api.get("/api/sessions/trip/shares/").json()
    assert [s["id"] for s in listed] == [created["id"]]
    assert all("url" not in s for s in listed)


def test_the_token_is_stored_hashed(api, alice):
    a_conversation(alice.id)
    _, token = share(api)
    row = ShareLink.objects.get()
    assert token not in (row.token_hash, str(row.pk)) and len(row.token_hash) == 64


def not_found_answers(token):
    json_answer = anonymous().get(f"/api/shared/{token}/")
    page = anonymous().get(f"/s/{token}")
    return json_answer.status_code, json_answer.json(), page.status_code


def test_revoked_expired_and_unknown_links_answer_the_same_404(api, alice):
    a_conversation(alice.id)
    unknown = not_found_answers("x" * 43)
    assert unknown == (404, {"code": "not_found", "detail": "no such share"}, 404)

    revoked, revoked_token = share(api)
    assert api.delete(f"/api/sessions/trip/shares/{revoked['id']}/").status_code == 204
    assert not_found_answers(revoked_token) == unknown

    expiring, expiring_token = share(api, expires_in_days=1)
    assert expiring["expires_at"] is not None
    assert anonymous().get(f"/api/shared/{expiring_token}/").status_code == 200
    ShareLink.objects.filter(pk=expiring["id"]).update(
        expires_at=timezone.now() - timedelta(seconds=1)
    )
    assert not_found_answers(expiring_token) == unknown

    _, deleted_token = share(api)
    api.delete("/api/sessions/trip/")
    assert not_found_answers(deleted_token) == unknown
    assert not ShareLink.objects.exists(), "a deleted session's links go with it"


def test_another_users_copy_becomes_their_session_and_the_original_stays_hidden(
    api, bob_api, alice, bob
):
    a_conversation(alice.id)
    _, token = share(api, include_tools=True)
    shown = anonymous().get(f"/api/shared/{token}/").json()

    assert anonymous().post(f"/api/shared/{token}/copy/").status_code in (401, 403)
    response = bob_api.post(f"/api/shared/{token}/copy/")
    assert response.status_code == 201, response.content
    copy = response.json()
    assert copy["id"] != "trip" and copy["title"] == "Trip to Lisbon"
    assert copy["parent_id"] is None
    assert get_store().get_meta(copy["id"]).owner_id == bob.id
    entries = bob_api.get(f"/api/sessions/{copy['id']}/entries/").json()["entries"]
    assert [(e["role"], e["content"]) for e in entries] == [
        (e["role"], e["content"]) for e in shown["entries"]
    ]
    assert [s["id"] for s in bob_api.get("/api/sessions/").json()] == [copy["id"]]
    for path in ("/api/sessions/trip/", "/api/sessions/trip/shares/"):
        answer = bob_api.get(path)
        assert answer.status_code == 404 and answer.json()["code"] == "not_found"
    assert bob_api.post("/api/sessions/trip/shares/", {}, format="json").status_code == 404
    share_id = ShareLink.objects.get().pk
    assert bob_api.delete(f"/api/sessions/trip/shares/{share_id}/").status_code == 404
    assert ShareLink.objects.count() == 1


@pytest.mark.parametrize(
    "body",
    [
        {"expires_in_days": 0},
        {"expires_in_days": 366},
        {"expires_in_days": "soon"},
        {"include_tools": "yes"},
    ],
)
def test_a_bad_share_request_is_refused_and_makes_no_link(api, alice, body):
    a_conversation(alice.id)
    response = api.post("/api/sessions/trip/shares/", body, format="json")
    assert response.status_code == 400 and response.json()["code"] == "invalid"
    assert not ShareLink.objects.exists()


def test_reading_shares_is_throttled(api, alice, monkeypatch):
    # DRF reads the rates from settings when it loads; this stands for SHARE_THROTTLE_RATE=3/min.
    # A reader without an account is counted by address, apart from the owner who made it.
    monkeypatch.setattr(ShareRateThrottle, "THROTTLE_RATES", {"shares": "3/min"})
    a_conversation(alice.id)
    _, token = share(api)
    reader = anonymous()
    answers = [reader.get(f"/api/shared/{token}/").status_code for _ in range(3)]
    assert answers == [200, 200, 200]
    refused = reader.get(f"/api/shared/{token}/")
    assert refused.status_code == 429 and refused.json()["code"] == "throttled"
    assert "Retry-After" in refused.headers
    page = reader.get(f"/s/{token}")
    assert page.status_code == 429 and "Retry-After" in page.headers
