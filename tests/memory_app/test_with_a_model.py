"""Consolidation and compaction with a real model configured (official SDK, local fake API)."""

import pytest

from memory_app.models import ProfileFact
from memory_app.services import memory_consolidate
from sessions_app.services.compaction import compaction_append
from tests.builders import arithmetic_turn, play_turn
from tests.fakes.llm_server import Reply, serving_the_apps_model

pytestmark = pytest.mark.django_db


@pytest.fixture
def model(settings):
    with serving_the_apps_model(settings) as server:
        yield server


def system_and_user(request_body) -> tuple[str, str]:
    messages = request_body["messages"]
    assert [m["role"] for m in messages] == ["system", "user"]
    assert not request_body.get("tools")
    return messages[0]["content"], messages[1]["content"]


def test_the_model_finds_facts_the_offline_rules_would_miss(model, alice):
    model.script(
        Reply(
            text='Here you go: {"facts": [{"message": 1, "key": "Pet", '
            '"text": "The user has a cat called Tom.", "confidence": 0.9}]}'
        )
    )
    play_turn("s-pet", "Our cat Tom keeps me up at night.", "Poor you.", owner_id=alice.id)
    assert memory_consolidate(session_id="s-pet")["facts"] == 1

    fact = ProfileFact.objects.get(owner=alice)
    assert (fact.key, fact.text, fact.confidence) == ("pet", "The user has a cat called Tom.", 0.9)
    system, user = system_and_user(model.requests[0])
    assert "extract durable facts" in system
    assert user == '1. "Our cat Tom keeps me up at night."'


def test_a_failing_model_falls_back_to_the_offline_rules(model, alice):
    model.script(Reply(status=400, error="model overloaded"))
    play_turn("s-down", "My name is Eve.", "Hi Eve.", owner_id=alice.id)
    memory_consolidate(session_id="s-down")
    assert list(ProfileFact.objects.values_list("key", "text")) == [
        ("name", "The user's name is Eve.")
    ]


def test_the_model_writes_the_compaction_summary(model):
    model.script(Reply(text="- The user is Mia from Turin.\n- 12*12 = 144."))
    play_turn("s-sum", "My name is Mia and I live in Turin.", "Nice to meet you, Mia!")
    arithmetic_turn("s-sum", "12*12", "144")
    play_turn("s-sum", "Thanks!", "You're welcome.")

    record = compaction_append(session_id="s-sum")

    assert record.data["summary"] == "- The user is Mia from Turin.\n- 12*12 = 144."
    system, user = system_and_user(model.requests[0])
    assert "compress the earlier part of a conversation" in system
    assert "User: My name is Mia and I live in Turin." in user
    assert 'Jarvis calls calculator({"expression": "12*12"})' in user
    assert "Thanks!" not in user  # the kept last turn is not summarized
