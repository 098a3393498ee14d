"""A conversation of any length keeps working (docs/design.md §22): against the local fake
OpenAI and Anthropic servers set to refuse, in each provider's own shape, every request over
a size, a long session compacts itself and answers; what cannot fit ends the turn with
`context_too_long`, never a loop; the history stays whole and valid throughout."""

import itertools

import pytest

from sessions_app.runtime.context.compaction import SUMMARY_INSTRUCTIONS
from sessions_app.runtime.context.history import RESULT_CUT_TEXT
from sessions_app.runtime.providers.anthropic import AnthropicProvider
from sessions_app.runtime.providers.openai import OpenAIProvider
from sessions_app.runtime.turn.turns import turn_run
from sessions_app.selectors.turns import turn_requests
from sessions_app.services.sessions import session_usage
from sessions_app.store import get_store
from tests.builders import turn_entries
from tests.fakes.llm_server import FakeLLMServer

from .conftest import assert_history_valid

pytestmark = pytest.mark.django_db(transaction=True)

# What the fake servers accept: far less than the models' windows, as a provider whose
# count differs from ours would.
MAX_REQUEST_CHARS = 40_000


@pytest.fixture(params=["openai", "anthropic"])
def api(request):
    return request.param


@pytest.fixture
def server():
    with FakeLLMServer(max_request_chars=MAX_REQUEST_CHARS) as running:
        yield running


@pytest.fixture
def provider(api, server):
    if api == "openai":
        return OpenAIProvider("gpt-4o", api_key="test", base_url=server.openai_url, max_retries=0)
    return AnthropicProvider(
        "claude-haiku-4-5", api_key="test", base_url=server.base_url, max_retries=0
    )


def long_text(turn: int, chars: int) -> str:
    """Prose-like text of about `chars` characters, different for every turn."""
    words = (f"word{turn}x{index % 997} and more" for index in itertools.count())
    text = ""
    while len(text) < chars:
        text += " ".join(itertools.islice(words, 500)) + ".\n"
    return text


def is_summary_request(body: dict) -> bool:
    """A request that asked for a summary of older turns (not one of a turn's steps)."""
    system = body.get("system") or body["messages"][0]["content"]
    return system == SUMMARY_INSTRUCTIONS


def seed_long_session(session_id: str, turns: int = 20, chars: int = 50_000) -> list:
    """About turns × chars characters of history (20 × 50 kB: a megabyte), each turn whole."""
    store = get_store()
    store.create(session_id)
    for number in range(turns):
        store.append(
            session_id,
            turn_entries(
                long_text(number, chars),
                f"Noted, part {number}.",
                turn=f"seeded{number}",
                tools=[("calculator", {"expression": f"{number}+1"}, str(number + 1))],
            ),
        )
    return store.get_messages(session_id)


def test_a_megabyte_of_history_compacts_itself_and_keeps_answering(server, provider, backend):
    seeded = seed_long_session("test-long")
    assert sum(len(entry.content) for entry in seeded) > 1_000_000
    events = []

    first = turn_run(
        session_id="test-long",
        text="What did we talk about?",
        provider=provider,
        on_event=events.append,
    )
    second = turn_run(session_id="test-long", text="And then?", provider=provider)

    assert (first.status, second.status) == ("completed", "completed")
    # Every request that got an answer fitted; the provider refused some for their length,
    # and the turn compacted further instead of failing.
    assert server.request_chars and max(server.request_chars) <= MAX_REQUEST_CHARS
    assert server.length_refused
    history = get_store().get_messages("test-long")
    compactions = [entry for entry in history if entry.kind == "compaction"]
    reasons = [entry.data["reason"] for entry in compactions]
    assert "auto" in reasons and "overflow" in reasons
    for entry in compactions:
        assert entry.data["tokens_after"] < entry.data["tokens_before"]
        kept = next(e for e in history if e.seq == entry.data["first_kept_seq"])
        assert kept.kind == "turn_start"  # cut where a turn starts: calls keep their results
    types = [event["type"] for event in events]
    assert types.index("compaction_start") < types.index("compaction_end")
    # The history is whole: what was there is there unchanged, and valid for both providers.
    assert history[: len(seeded)] == seeded
    assert_history_valid("test-long")
    # What a replay rebuilds is what the server received.
    received_by_turns = [body for body in server.requests if not is_summary_request(body)]
    for result, received in zip([first, second], received_by_turns, strict=True):
        [request] = turn_requests(session_id="test-long", owner_id=None, turn_id=result.turn_id)[
            "requests"
        ]
        assert request["body"] == received


def test_a_turn_too_long_even_alone_ends_context_too_long_without_a_loop(server, provider, backend):
    seed_long_session("test-too-long", turns=2, chars=5_000)

    result = turn_run(
        session_id="test-too-long", text=long_text(99, MAX_REQUEST_CHARS), provider=provider
    )

    assert result.status == "error"
    assert result.code == "context_too_long"
    # Refused, compacted as far as a cut goes, refused once more: then it stops.
    assert len(server.length_refused) == 2
    assert [body for body in server.requests if not is_summary_request(body)] == []
    end = result.entries[-1]
    assert end.kind == "turn_end" and end.data["code"] == "context_too_long"
    [compaction] = [e for e in result.entries if e.kind == "compaction"]
    assert compaction.data["reason"] == "overflow"
    assert_history_valid("test-too-long")

    # The session goes on: a short request fits again.
    again = turn_run(session_id="test-too-long", text="Shorter, then?", provider=provider)
    assert again.status == "completed"


def test_a_big_tool_result_is_sent_as_head_and_tail_and_stored_whole(
    server, provider, backend, settings
):
    settings.TOOL_RESULT_MAX_TOKENS = 1000
    store = get_store()
    store.create("test-big-result")
    big = "HEAD " + "x" * 200_000 + " TAIL"
    store.append(
        "test-big-result",
        turn_entries(
            "Read the log", "It is long.", tools=[("calculator", {"expression": "1"}, big)]
        ),
    )

    result = turn_run(session_id="test-big-result", text="What was in it?", provider=provider)

    assert result.status == "completed"
    sent = str(server.requests[-1]["messages"])
    assert "HEAD " in sent and " TAIL" in sent
    assert RESULT_CUT_TEXT.format(left_out=len(big) - 4000) in sent.replace("\\n", "\n")
    assert server.request_chars[-1] < 10_000
    stored = next(e for e in store.get_messages("test-big-result") if e.role == "tool")
    assert stored.content == big


def test_a_summary_the_model_writes_for_an_automatic_compaction_is_counted_as_usage(
    provider, backend, settings
):
    """The model's own summary calls are the session's usage (docs/design.md §22): kept on
    the `compaction` entry and counted by the session's usage. A window small enough that
    the seeded history cannot fit makes the turn compact before its first call; the server
    takes every request, so the summary is the model's."""
    settings.MODEL_LIMITS = {
        "gpt-4o": {"window": 8000, "output": 1000},
        "claude-haiku-4-5": {"window": 8000, "output": 1000},
    }
    seed_long_session("test-usage", turns=4, chars=4_000)

    result = turn_run(session_id="test-usage", text="What did we talk about?", provider=provider)

    assert result.status == "completed"
    [compaction] = [e for e in get_store().get_messages("test-usage") if e.kind == "compaction"]
    assert compaction.data["reason"] == "auto"
    assert compaction.model and compaction.usage["input_tokens"] > 0
    own = session_usage(session_id="test-usage", owner_id=None)
    answers = [e for e in result.entries if e.kind == "message" and e.role == "assistant"]
    answered = sum(entry.usage["input_tokens"] for entry in answers)
    assert own["input_tokens"] == answered + compaction.usage["input_tokens"]
