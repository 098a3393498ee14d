"""Ids a user cannot choose and agents that do not exist (docs/design.md §6, §7): sub-agent
session ids (`agent_…`) are made by the server only, and a new session names a defined
agent. Either way the answer is a 400 with its own code and nothing is created."""

import pytest

from sessions_app.store import get_store
from tests.sessions_app.web.api.test_input_limits import assert_error

pytestmark = pytest.mark.django_db

RESERVED = ["agent_researcher__s1", "agent_librarian:1", "agent_librarian", "agent_anything"]


@pytest.mark.parametrize("session_id", RESERVED)
def test_creating_a_sub_agent_id_is_400_reserved_id(api, session_id):
    assert_error(api.post("/api/sessions/", {"id": session_id}, format="json"), 400, "reserved_id")
    assert get_store().get_meta(session_id) is None


def test_another_users_sub_agent_id_answers_like_a_missing_one(api, bob):
    taken = "agent_researcher__bobs-chat"
    get_store().create(taken, agent="researcher", owner_id=bob.id)
    assert_error(api.post("/api/sessions/", {"id": taken}, format="json"), 400, "reserved_id")
    assert get_store().get_meta(taken).owner_id == bob.id


def test_my_own_sub_agent_session_is_there_as_before(api, alice):
    mine = "agent_researcher__my-chat"
    get_store().create(mine, agent="researcher", owner_id=alice.id, spawned_by="my-chat")
    response = api.post("/api/sessions/", {"id": mine, "agent": "researcher"}, format="json")
    assert response.status_code == 200, response.content


def test_branching_into_a_sub_agent_id_is_400_reserved_id(api):
    assert api.post("/api/sessions/", {"id": "s1"}, format="json").status_code == 201
    branch = api.post("/api/sessions/s1/branch/", {"id": "agent_researcher__s1"}, format="json")
    assert_error(branch, 400, "reserved_id")
    assert get_store().get_meta("agent_researcher__s1") is None
    # Ids that merely contain the word are anyone's.
    assert (
        api.post("/api/sessions/s1/branch/", {"id": "my-agent_x"}, format="json").status_code == 201
    )


@pytest.mark.parametrize("body", [{"agent": "nope"}, {"id": "s2", "agent": "nope"}])
def test_a_new_session_of_an_unknown_agent_is_400_unknown_agent(api, body):
    response = api.post("/api/sessions/", body, format="json")
    assert_error(response, 400, "unknown_agent")
    assert "researcher" in response.json()["detail"], "the answer names the defined agents"
    assert api.get("/api/sessions/").json() == []
    created = api.post("/api/sessions/", {**body, "agent": "researcher"}, format="json")
    assert created.status_code == 201
