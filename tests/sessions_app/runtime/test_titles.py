"""A conversation's title (docs/design.md §24): after the first answer, a configured model
names it in a few words, and that call is the session's own usage (§22); the offline model
leaves the first prompt's words. A later turn, or a name the person gave, is never replaced."""

import asyncio

import pytest
from django.conf import settings as django_settings

from sessions_app.models import ModelUsage
from sessions_app.runtime.turn.turns import turn_run, turn_run_async
from sessions_app.services import organize
from sessions_app.store import get_store
from tests.builders import token_client
from tests.fakes.llm_server import FakeLLMServer, Hold, Reply
from tests.handshakes import pool_threads_taken
from tests.helpers import GUARD_SEC

pytestmark = pytest.mark.django_db(transaction=True)

PROMPT = "What is the capital of France, and why did it become the capital at all?"


@pytest.fixture
def server(settings):
    with FakeLLMServer() as running:
        settings.OPENAI_BASE_URL = running.openai_url
        settings.OPENAI_API_KEY = "test"
        settings.JARVIS_MODEL = "openai:gpt-4o"
        yield running


def turn(session_id, owner, text):
    result = turn_run(session_id=session_id, text=text, owner_id=owner.id)
    assert result.status == "completed", result.error


def session_of(user, session_id="chat-1"):
    response = token_client(user).get(f"/api/sessions/{session_id}/")
    assert response.status_code == 200, response.content
    return response.json()


def usage_of(user, session_id="chat-1"):
    return token_client(user).get(f"/api/sessions/{session_id}/usage/").json()


def test_the_model_names_the_conversation_and_the_call_is_counted(backend, server, alice):
    get_store().create("chat-1", owner_id=alice.id)
    server.script(
        Reply(text="Paris, since the Capetians.", input_tokens=100, output_tokens=20),
        Reply(text='"Capital of France."\n', input_tokens=40, output_tokens=5),
    )
    turn("chat-1", alice, PROMPT)
    assert session_of(alice)["title"] == "Capital of France"
    # The title's question saw the exchange, not the whole context.
    asked = server.requests[-1]["messages"][-1]["content"]
    assert PROMPT in str(asked) and "Capetians" in str(asked)
    usage = usage_of(alice)
    assert (usage["input_tokens"], usage["output_tokens"]) == (140, 25)

    server.script(Reply(text="Yes.", input_tokens=10, output_tokens=1))
    turn("chat-1", alice, "Really?")
    assert session_of(alice)["title"] == "Capital of France", "only the first answer names it"
    assert len(server.requests) == 3


def test_a_name_given_before_the_answer_is_kept(backend, server, alice):
    get_store().create("chat-1", owner_id=alice.id)
    organize.session_organize(session_id="chat-1", owner_id=alice.id, title="My own name")
    server.script(Reply(text="Paris."), Reply(text="Ignored title"))
    turn("chat-1", alice, PROMPT)
    assert session_of(alice)["title"] == "My own name"
    assert len(server.requests) == 1, "a named conversation asks for no title"


def test_a_failed_title_call_keeps_the_first_words(backend, server, alice):
    get_store().create("chat-1", owner_id=alice.id)
    server.script(Reply(text="Paris."), Reply(status=400, error="refused"))
    turn("chat-1", alice, PROMPT)
    title = session_of(alice)["title"]
    assert title.startswith("What is the capital of France") and title.endswith("…")


def test_the_offline_model_leaves_the_first_prompts_words(backend, alice, settings):
    settings.JARVIS_MODEL = "offline"
    get_store().create("chat-1", owner_id=alice.id)
    turn("chat-1", alice, "Plan a picnic for Saturday\nwith sandwiches")
    assert session_of(alice)["title"] == "Plan a picnic for Saturday"
    assert set(usage_of(alice)["by_model"]) == {"offline"}, "the turn's own call only"
    assert not ModelUsage.objects.filter(session_id="chat-1").exists()


def test_title_model_names_the_model_that_writes_titles(backend, server, alice, settings):
    settings.TITLE_MODEL = "openai:gpt-4o-mini"  # a small model is enough for a few words
    get_store().create("chat-1", owner_id=alice.id)
    server.script(
        Reply(text="Paris.", input_tokens=100, output_tokens=20),
        Reply(text="French capital", input_tokens=40, output_tokens=5),
    )
    turn("chat-1", alice, PROMPT)
    assert [request["model"] for request in server.requests] == ["gpt-4o", "gpt-4o-mini"]
    assert session_of(alice)["title"] == "French capital"
    by_model = usage_of(alice)["by_model"]
    assert (by_model["gpt-4o-mini"]["input_tokens"], by_model["gpt-4o"]["input_tokens"]) == (
        40,
        100,
    )


def test_title_model_offline_keeps_the_first_words_with_a_real_model(
    backend, server, alice, settings
):
    settings.TITLE_MODEL = "offline"
    get_store().create("chat-1", owner_id=alice.id)
    server.script(Reply(text="Paris."))
    turn("chat-1", alice, "Capital of France?")
    assert session_of(alice)["title"] == "Capital of France?"
    assert len(server.requests) == 1


def test_a_conversation_being_named_leaves_every_store_thread_to_the_turns(backend, server, alice):
    """The title's model call blocks its thread for as long as the model thinks: in the
    store pool, a few conversations named at once would stop every other turn's writes."""
    get_store().create("chat-1", owner_id=alice.id)
    naming = Hold(words=0)
    server.script(Reply(text="Paris."), Reply(text="Capital of France", first_hold=naming))

    async def scenario():
        # The event loop's own way (a worker's), not a synchronous caller's thread.
        turn = asyncio.ensure_future(
            turn_run_async(session_id="chat-1", text=PROMPT, owner_id=alice.id)
        )
        try:
            named = await asyncio.to_thread(naming.reached.wait, GUARD_SEC)
            assert named, "the conversation was never named"
            threads = django_settings.STORE_THREADS
            waits = "a store thread waits for the title's model call"
            async with pool_threads_taken("store", threads, why_not=waits):
                pass  # while the model thinks of the title, every store thread was taken
        finally:
            naming.release()
        return await turn

    assert asyncio.run(scenario()).status == "completed"
    assert session_of(alice)["title"] == "Capital of France"
