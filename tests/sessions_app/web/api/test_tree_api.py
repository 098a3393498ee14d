"""A session's family as a tree (docs/design.md §24): from any member, the root with its
branches and theirs, each with where it branched; own sessions only."""

import pytest

from sessions_app.store import get_store
from tests.builders import turn_entries

pytestmark = pytest.mark.django_db


def branch(api, source, at_seq=None):
    body = {} if at_seq is None else {"at_seq": at_seq}
    response = api.post(f"/api/sessions/{source}/branch/", body, format="json")
    assert response.status_code == 201, response.content
    return response.json()["id"]


def shape(node):
    return (node["id"], node["branched_at_seq"], [shape(child) for child in node["children"]])


def test_every_member_of_a_family_sees_the_same_three_level_tree(api, alice):
    get_store().create("root", owner_id=alice.id, title="Root")
    get_store().append("root", turn_entries("one", "1", turn="t1"))
    get_store().append("root", turn_entries("two", "2", turn="t2"))
    first = branch(api, "root", at_seq=4)
    second = branch(api, "root")
    grandchild = branch(api, first)
    api.post("/api/sessions/", {"id": "stranger"}, format="json")  # not of the family

    # The first branch was cut mid-history: it holds a summary of what it left (seq 5).
    expected = (
        "root",
        None,
        [(first, 4, [(grandchild, 5, [])]), (second, 8, [])],
    )
    for member in ("root", first, second, grandchild):
        response = api.get(f"/api/sessions/{member}/tree/")
        assert response.status_code == 200, response.content
        tree = response.json()
        assert shape(tree) == expected
    assert set(tree) == {"id", "title", "parent_id", "branched_at_seq", "children"}
    assert (tree["title"], tree["parent_id"]) == ("Root", None)
    assert tree["children"][0]["children"][0]["parent_id"] == first
    assert shape(api.get("/api/sessions/stranger/tree/").json()) == ("stranger", None, [])


def test_a_deleted_parent_leaves_its_branches_a_family_of_their_own(api, alice):
    get_store().create("root", owner_id=alice.id)
    get_store().append("root", turn_entries("one", "1"))
    child = branch(api, "root")
    grandchild = branch(api, child)
    api.delete("/api/sessions/root/")
    tree = api.get(f"/api/sessions/{grandchild}/tree/").json()
    assert shape(tree) == (child, 4, [(grandchild, 4, [])])


def test_another_users_tree_is_not_found(api, bob_api, alice):
    get_store().create("root", owner_id=alice.id)
    response = bob_api.get("/api/sessions/root/tree/")
    assert response.status_code == 404 and response.json()["code"] == "not_found"
