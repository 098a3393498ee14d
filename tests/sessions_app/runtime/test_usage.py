"""Usage and cost (docs/design.md §22): every model call counted once, where it was spent.

Turns, summaries and sub-agents talk to the local fake OpenAI server through the official
SDK, which reports the tokens; `GET …/usage/` and `/cost` must agree on the sums: a
branch's copied entries under `inherited` (never its own), a delegated sub-agent's turn
under `sub_agents`, a summary's call and consolidation's question as the session's own, and
`cost_usd: null` for a model nobody priced.
"""

import pytest

from memory_app.services import memory_consolidate
from sessions_app.models import ModelUsage
from sessions_app.runtime.turn.turns import turn_run
from sessions_app.services import deletion, sessions
from sessions_app.store import get_store
from sessions_app.web.commands import command_run
from tests.builders import token_client
from tests.fakes.llm_server import FakeLLMServer, Reply

pytestmark = pytest.mark.django_db(transaction=True)

ZERO = {
    "input_tokens": 0,
    "output_tokens": 0,
    "cached_tokens": 0,
    "reasoning_tokens": 0,
    "cost_usd": 0.0,
    "by_model": {},
}


@pytest.fixture
def server(settings):
    with FakeLLMServer() as running:
        settings.OPENAI_BASE_URL = running.openai_url
        settings.OPENAI_API_KEY = "test"
        yield running


def usage_of(user, session_id: str) -> dict:
    response = token_client(user).get(f"/api/sessions/{session_id}/usage/")
    assert response.status_code == 200, response.content
    body = response.json()
    # `/cost` in the chat shows the same numbers as the endpoint.
    assert command_run(session_id=session_id, owner_id=user.id, line="/cost").data == body
    return body


def session_on(owner, session_id: str, model: str = "openai:gpt-4o") -> str:
    # Named up front: the model is not asked for a title, so each test counts its own calls.
    get_store().create(session_id, owner_id=owner.id, title=session_id)
    sessions.session_configure(session_id=session_id, owner_id=owner.id, model=model)
    return session_id


def turn(session_id: str, owner, text: str) -> None:
    result = turn_run(session_id=session_id, text=text, owner_id=owner.id)
    assert result.status == "completed", result.error


def test_a_branch_shows_its_parents_tokens_as_inherited_and_none_as_its_own(backend, server, alice):
    parent = session_on(alice, "chat-parent")
    server.script(Reply(text="Hello.", input_tokens=1000, output_tokens=200, cached_tokens=400))
    turn(parent, alice, "hello")
    spent = usage_of(alice, parent)
    # 600 fresh input at $2.50, 400 cached at $1.25, 200 output at $10 per million.
    gpt_4o = {
        "input_tokens": 1000,
        "output_tokens": 200,
        "cached_tokens": 400,
        "reasoning_tokens": 0,
        "cost_usd": 0.004,
    }
    assert spent == {
        **gpt_4o,
        "by_model": {"gpt-4o": gpt_4o},
        "sub_agents": {},
        "inherited": ZERO,
    }

    branch = sessions.session_branch(session_id=parent, owner_id=alice.id).id
    fresh = usage_of(alice, branch)
    assert {key: fresh[key] for key in ZERO} == ZERO, "a fresh branch has spent nothing"
    assert fresh["inherited"] == {**gpt_4o, "by_model": {"gpt-4o": gpt_4o}}

    server.script(Reply(text="Again.", input_tokens=50, output_tokens=5))
    turn(branch, alice, "hello again")
    after = usage_of(alice, branch)
    assert (after["input_tokens"], after["output_tokens"]) == (50, 5)
    assert after["inherited"]["input_tokens"] == 1000
    # The parent's own numbers are untouched by what its branch did.
    assert usage_of(alice, parent) == spent


def test_a_delegated_sub_agents_tokens_roll_up_under_sub_agents(backend, server, alice, settings):
    settings.JARVIS_MODEL = "openai:gpt-4o"  # the sub-agent's session uses the default model
    parent = session_on(alice, "chat-boss")
    server.script(
        Reply(
            calls=[("delegate", {"agent": "scratch", "task": "add 2 and 3"})],
            input_tokens=100,
            output_tokens=10,
        ),
        Reply(text="5", input_tokens=300, output_tokens=30, reasoning_tokens=20),
        Reply(text="It is 5.", input_tokens=120, output_tokens=12),
    )
    turn(parent, alice, "ask scratch to add 2 and 3")
    assert len(server.requests) == 3

    usage = usage_of(alice, parent)
    assert (usage["input_tokens"], usage["output_tokens"]) == (220, 22)
    scratch = usage["sub_agents"]["scratch"]
    assert (scratch["input_tokens"], scratch["output_tokens"]) == (300, 30)
    assert scratch["reasoning_tokens"] == 20
    assert scratch["by_model"]["gpt-4o"]["cost_usd"] == pytest.approx(0.00105)
    # The scratch session itself is gone (per_task): its tokens stayed with the caller.
    assert [s.id for s in get_store().list(owner_id=alice.id)] == [parent]

    # A branch of the caller shows them as inherited, as it does the caller's own.
    branch = sessions.session_branch(session_id=parent, owner_id=alice.id).id
    copied = usage_of(alice, branch)
    assert (copied["input_tokens"], copied["sub_agents"]) == (0, {})
    assert copied["inherited"]["input_tokens"] == 220 + 300
    # The caller's usage rows go with it.
    deletion.session_delete(session_id=parent, owner_id=alice.id)
    assert not ModelUsage.objects.filter(session_id=parent).exists()


def test_summary_calls_are_the_sessions_own_usage(backend, server, alice, settings):
    settings.JARVIS_MODEL = "openai:gpt-4o"  # summaries ask the configured model
    session_id = session_on(alice, "chat-long")
    server.script(
        Reply(text="First.", input_tokens=10, output_tokens=2),
        Reply(text="Second.", input_tokens=10, output_tokens=2),
        Reply(text="- they said hello twice", input_tokens=500, output_tokens=50),
    )
    turn(session_id, alice, "hello")
    turn(session_id, alice, "hello again")
    compaction = sessions.session_compact(session_id=session_id, owner_id=alice.id)
    assert compaction.usage["input_tokens"] == 500
    usage = usage_of(alice, session_id)
    assert (usage["input_tokens"], usage["output_tokens"]) == (520, 54)

    # A branch at a seq gets a summary of the path it leaves: that call is the branch's.
    server.script(Reply(text="- said hello again", input_tokens=70, output_tokens=7))
    first_answer = next(
        e for e in get_store().get_messages(session_id) if e.role == "assistant"
    ).seq
    branch = sessions.session_branch(
        session_id=session_id, owner_id=alice.id, at_seq=first_answer
    ).id
    usage = usage_of(alice, branch)
    assert (usage["input_tokens"], usage["output_tokens"]) == (70, 7)
    assert usage["inherited"]["input_tokens"] == 10


def test_consolidations_question_is_the_sessions_own_usage(backend, server, alice, settings):
    settings.JARVIS_MODEL = "openai:gpt-4o"  # consolidation asks the configured model
    session_id = session_on(alice, "chat-taught")
    server.script(
        Reply(text="Noted.", input_tokens=10, output_tokens=2),
        Reply(text='{"facts": []}', input_tokens=40, output_tokens=4),
    )
    turn(session_id, alice, "my favourite color is green")
    assert memory_consolidate(session_id=session_id)["episodes"] == 1
    usage = usage_of(alice, session_id)
    assert (usage["input_tokens"], usage["output_tokens"]) == (50, 6)


def test_a_model_without_a_price_costs_null_never_a_guess(backend, server, alice, settings):
    session_id = session_on(alice, "chat-mystery", model="openai:mystery-9")
    server.script(Reply(text="Hi.", input_tokens=1_000_000, output_tokens=1_000_000))
    turn(session_id, alice, "hello")
    usage = usage_of(alice, session_id)
    assert usage["cost_usd"] is None
    assert usage["by_model"]["mystery-9"]["cost_usd"] is None
    assert usage["input_tokens"] == 1_000_000, "the tokens are shown all the same"

    settings.MODEL_PRICES = {"mystery-9": {"input": 1.0, "output": 3.0}}
    usage = usage_of(alice, session_id)
    assert usage["cost_usd"] == pytest.approx(4.0)


def test_another_users_usage_is_not_found(backend, alice, bob):
    get_store().create("chat-private", owner_id=alice.id)
    response = token_client(bob).get("/api/sessions/chat-private/usage/")
    assert response.status_code == 404
    assert response.json()["code"] == "not_found"
