"""Naming and ordering the list (docs/design.md §24): PATCH renames, pins and archives; the
list shows pinned sessions first and archived ones only with `?archived=true`."""

import pytest

pytestmark = pytest.mark.django_db


def ids(api, query=""):
    response = api.get(f"/api/sessions/{query}")
    assert response.status_code == 200, response.content
    return [session["id"] for session in response.json()]


def test_rename_pin_and_archive_shape_the_list(api):
    for session_id in ("old", "middle", "new"):  # made in this order: newest last
        api.post("/api/sessions/", {"id": session_id}, format="json")
    assert ids(api) == ["new", "middle", "old"]

    renamed = api.patch("/api/sessions/middle/", {"title": "  Trip plans  "}, format="json")
    assert renamed.status_code == 200, renamed.content
    assert renamed.json()["title"] == "Trip plans"
    pinned = api.patch("/api/sessions/old/", {"pinned": True}, format="json").json()
    assert (pinned["pinned"], pinned["archived"]) == (True, False)
    assert ids(api) == ["old", "new", "middle"], "pinned first; the rest by activity"

    api.patch("/api/sessions/new/", {"archived": True}, format="json")
    assert ids(api) == ["old", "middle"]
    assert ids(api, "?archived=false") == ["old", "middle"]
    assert ids(api, "?archived=true") == ["new"]
    assert api.get("/api/sessions/new/").json()["archived"] is True

    api.patch("/api/sessions/new/", {"archived": False, "pinned": True}, format="json")
    assert ids(api) == ["new", "old", "middle"]
    assert api.get("/api/sessions/middle/").json()["title"] == "Trip plans"


@pytest.mark.parametrize(
    "body",
    [{"title": ""}, {"title": "   "}, {"title": "x" * 201}, {"title": 5}, {"pinned": "maybe"}],
)
def test_a_bad_value_is_refused_and_changes_nothing(api, body):
    api.post("/api/sessions/", {"id": "s1", "title": "Kept"}, format="json")
    response = api.patch("/api/sessions/s1/", body, format="json")
    assert response.status_code == 400, response.content
    assert response.json()["code"] == "invalid"
    after = api.get("/api/sessions/s1/").json()
    assert (after["title"], after["pinned"], after["archived"]) == ("Kept", False, False)


def test_a_bad_archived_filter_is_refused(api):
    response = api.get("/api/sessions/?archived=sometimes")
    assert response.status_code == 400 and response.json()["code"] == "invalid"


def test_another_users_session_cannot_be_renamed_or_pinned(api, bob_api):
    api.post("/api/sessions/", {"id": "s1", "title": "Mine"}, format="json")
    for body in ({"title": "Bob's"}, {"pinned": True}, {"archived": True}):
        response = bob_api.patch("/api/sessions/s1/", body, format="json")
        assert response.status_code == 404 and response.json()["code"] == "not_found"
    after = api.get("/api/sessions/s1/").json()
    assert (after["title"], after["pinned"], after["archived"]) == ("Mine", False, False)
    assert ids(bob_api, "?archived=true") == []


def test_a_branch_starts_unpinned_and_in_the_list(api):
    api.post("/api/sessions/", {"id": "s1"}, format="json")
    api.patch("/api/sessions/s1/", {"pinned": True, "archived": True}, format="json")
    branch = api.post("/api/sessions/s1/branch/", {}, format="json").json()
    assert (branch["pinned"], branch["archived"]) == (False, False)
    assert ids(api) == [branch["id"]]
