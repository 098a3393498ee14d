"""What memory learned reaches the model (docs/design.md §22).

A fact consolidated from one conversation is in the system prompt of the next one's first
request, as the local fake server of each API receives it through the official SDK — and
the request replay (§20) rebuilds that request exactly. Never in a test session, never once
the person switched it off, and within MEMORY_CONTEXT_TOKENS, newest first.
"""

import json

import pytest
from django.utils import timezone

from memory_app.models import Procedure, ProfileFact
from memory_app.services import memory_consolidate
from sessions_app.runtime.turn.turns import turn_run
from sessions_app.services import sessions
from sessions_app.store import get_store
from tests.builders import token_client
from tests.fakes.llm_server import serving_both_sdks

pytestmark = pytest.mark.django_db(transaction=True)

MODELS = {"openai": "openai:gpt-4o", "anthropic": "anthropic:claude-haiku-4-5"}


@pytest.fixture
def server(settings):
    with serving_both_sdks(settings) as running:
        yield running


@pytest.fixture(params=["openai", "anthropic"])
def api_name(request):
    return request.param


def system_sent(request_body: dict) -> str:
    """The system prompt of a request as the API received it."""
    if "system" in request_body:  # Anthropic: a top-level field
        system = request_body["system"]
        return system if isinstance(system, str) else json.dumps(system)
    first = request_body["messages"][0]
    assert first["role"] == "system"
    return first["content"]


def first_turn(owner, session_id: str, text: str, model: str) -> str:
    """Run a new conversation's first turn; its turn id."""
    get_store().create(session_id, owner_id=owner.id)
    sessions.session_configure(session_id=session_id, owner_id=owner.id, model=model)
    result = turn_run(session_id=session_id, text=text, owner_id=owner.id)
    assert result.status == "completed", result.error
    return result.turn_id


def replayed(owner, session_id: str, turn_id: str) -> list[dict]:
    response = token_client(owner).get(f"/api/sessions/{session_id}/turns/{turn_id}/requests/")
    assert response.status_code == 200, response.content
    return [request["body"] for request in response.json()["requests"]]


def test_a_consolidated_fact_reaches_the_next_conversations_first_request(
    backend, server, api_name, alice
):
    model = MODELS[api_name]
    first_turn(alice, "chat-colors", "my favourite color is green", model)
    assert "green" not in system_sent(server.requests[-1]), "nothing was known yet"
    assert memory_consolidate(session_id="chat-colors")["facts"] == 1

    turn_id = first_turn(alice, "chat-later", "what is my favourite color?", model)
    asked = server.requests[-1]
    assert "The user's favorite color is green." in system_sent(asked)
    assert server.refusals == []
    # The memory is part of the stored request header: replay equals what the server got.
    assert replayed(alice, "chat-later", turn_id) == [asked]
    # What the model would receive next says the same.
    context = token_client(alice).get("/api/sessions/chat-later/context/?format=openai")
    assert "favorite color is green" in context.json()["messages"][0]["content"]


def test_a_test_session_gets_no_memory(backend, server, alice):
    ProfileFact.objects.create(owner=alice, key="favorite:color", text="The user likes green.")
    first_turn(alice, "test-colors", "what is my favourite color?", MODELS["openai"])
    assert "green" not in json.dumps(server.requests[-1])


def test_memory_in_context_is_switched_off_and_on_per_person(backend, server, alice, bob):
    ProfileFact.objects.create(owner=alice, key="favorite:color", text="The user likes green.")
    ProfileFact.objects.create(owner=bob, key="favorite:color", text="The user likes blue.")
    me = token_client(alice)
    answer = me.patch("/api/me/", {"memory_in_context": False}, format="json")
    assert answer.status_code == 200, answer.content
    assert answer.json()["memory_in_context"] is False
    assert me.get("/api/me/").json()["memory_in_context"] is False

    first_turn(alice, "chat-off", "what is my favourite color?", MODELS["openai"])
    assert "green" not in json.dumps(server.requests[-1])
    first_turn(bob, "chat-bob", "what is my favourite color?", MODELS["openai"])
    assert "blue" in system_sent(server.requests[-1]), "one person's switch is theirs alone"

    me.patch("/api/me/", {"memory_in_context": True}, format="json")
    first_turn(alice, "chat-on", "what is my favourite color?", MODELS["openai"])
    assert "green" in system_sent(server.requests[-1])


def test_a_bad_switch_value_is_refused_and_changes_nothing(backend, alice):
    me = token_client(alice)
    answer = me.patch("/api/me/", {"memory_in_context": "sometimes"}, format="json")
    assert answer.status_code == 400
    assert me.get("/api/me/").json()["memory_in_context"] is True


def test_the_newest_memory_comes_first_within_the_budget(backend, server, alice, settings):
    settings.MEMORY_CONTEXT_TOKENS = 24  # ~96 characters: the heading and one line
    old = timezone.now() - timezone.timedelta(days=30)
    ProfileFact.objects.create(
        owner=alice, key="home", text="The user lives in Oslo.", updated_at=old
    )
    ProfileFact.objects.create(owner=alice, key="name", text="The user is called Ada.")
    Procedure.objects.create(
        owner=alice,
        task_kind="arithmetic",
        title="How to handle arithmetic requests",
        steps=[{"tool": "calculator", "text": "Call the `calculator` tool."}],
        status=Procedure.Status.DRAFT,
    )
    first_turn(alice, "chat-budget", "who am I?", MODELS["openai"])
    system = system_sent(server.requests[-1])
    assert "Ada" in system and "Oslo" not in system
    assert "calculator" not in system, "a draft procedure is not the person's approved one"

    settings.MEMORY_CONTEXT_TOKENS = 1000
    Procedure.objects.filter(owner=alice).update(
        status=Procedure.Status.APPROVED, decided_at=timezone.now()
    )
    first_turn(alice, "chat-roomy", "who am I?", MODELS["openai"])
    system = system_sent(server.requests[-1])
    assert "Ada" in system and "Oslo" in system
    assert "How to handle arithmetic requests: Call the `calculator` tool." in system
