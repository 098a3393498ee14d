"""The OpenAI and Anthropic providers through their official SDKs, against a strict local
server that answers like the real APIs — including their 400s for broken histories."""

import asyncio
import threading

import anthropic
import openai
import pytest

from sessions_app.runtime.context.history import CRASH_RESULT_TEXT
from sessions_app.runtime.providers.anthropic import AnthropicProvider
from sessions_app.runtime.providers.openai import OpenAIProvider
from sessions_app.runtime.turn.turns import turn_abort, turn_run
from sessions_app.store import NewEntry, get_store
from tests.builders import crash_mid_step
from tests.fakes.llm_server import FakeLLMServer, Hold, Reply
from tests.handshakes import signal_waits
from tests.helpers import GUARD_SEC

from .conftest import assert_history_valid, stopped_while_the_model_holds

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def server():
    with FakeLLMServer() as running:
        yield running


@pytest.fixture(params=["openai", "anthropic"])
def api(request):
    return request.param


@pytest.fixture
def provider(api, server):
    if api == "openai":
        return OpenAIProvider("gpt-4o", api_key="test", base_url=server.openai_url, max_retries=0)
    return AnthropicProvider(
        "claude-haiku-4-5", api_key="test", base_url=server.base_url, max_retries=0
    )


@pytest.fixture
def session():
    return get_store().create("test-sdk").id


def tool_results_sent(api, request_body):
    """The tool results a request carried, as (text, is_error) — read the provider's way."""
    if api == "openai":
        return [(m["content"], None) for m in request_body["messages"] if m["role"] == "tool"]
    return [
        (block["content"], block.get("is_error", False))
        for message in request_body["messages"]
        if message["role"] == "user"
        for block in message["content"]
        if block["type"] == "tool_result"
    ]


def test_plain_answer_streams(server, provider, session):
    server.script(
        Reply(text="Hello Ada, nice to meet you", input_tokens=21, output_tokens=6, cached_tokens=5)
    )
    deltas = []
    result = turn_run(
        session_id=session,
        text="hi, I am Ada",
        provider=provider,
        on_event=lambda e: e["type"] == "delta" and deltas.append(e["text"]),
    )
    assert result.status == "completed"
    answer = result.entries[2]
    # Deltas that arrive together may reach listeners as one; none is lost.
    assert answer.content == "Hello Ada, nice to meet you" == "".join(deltas)
    # Every input token counted, the cached ones among them, whichever way the API reports
    # them (OpenAI inside prompt_tokens, Anthropic beside input_tokens).
    assert answer.usage == {
        "input_tokens": 21,
        "output_tokens": 6,
        "cached_tokens": 5,
        "reasoning_tokens": 0,
    }
    assert answer.model == provider.model
    assert result.entries[0].data["model"] == provider.label

    # The provider itself hands the text over piece by piece, as the stream brings it.
    server.script(Reply(text="Hello again, Ada", input_tokens=5, output_tokens=4))
    pieces = []
    reply = asyncio.run(
        provider.acomplete(
            entries=result.entries[:2],
            system_prompt="You are Jarvis.",
            tools=[],
            on_delta=pieces.append,
            abort=threading.Event(),
        )
    )
    assert reply.text == "Hello again, Ada" == "".join(pieces)
    assert len(pieces) > 1, "streamed in pieces"
    assert server.refusals == []


def test_one_tool_call_and_its_result_reach_the_model(api, server, provider, session):
    server.script(Reply(calls=[("calculator", {"expression": "2+3"})]), Reply(text="It is 5."))
    result = turn_run(session_id=session, text="what is 2+3?", provider=provider)
    assert result.status == "completed"
    assert [e.role for e in result.entries if e.kind == "message"] == [
        "user",
        "assistant",
        "tool",
        "assistant",
    ]
    assert result.entries[3].content == "5"
    assert tool_results_sent(api, server.requests[1])[0][0] == "5"
    assert server.refusals == []
    assert_history_valid(session)


def test_two_parallel_calls_are_answered_contiguously(api, server, provider, session):
    server.script(
        Reply(calls=[("calculator", {"expression": "6*7"}), ("clock", {})]),
        Reply(text="42, and the time."),
    )
    result = turn_run(session_id=session, text="6*7 and the time?", provider=provider)
    assert result.status == "completed"
    call_ids = [c["id"] for c in result.entries[2].tool_calls]
    assert [e.tool_call_id for e in result.entries[3:5]] == call_ids
    sent = tool_results_sent(api, server.requests[1])
    assert sent[0][0] == "42" and "UTC" in sent[1][0]
    if api == "anthropic":
        results_message = server.requests[1]["messages"][-1]
        assert [b["type"] for b in results_message["content"]] == ["tool_result", "tool_result"]
    assert server.refusals == []


def test_abort_mid_tool_leaves_a_history_the_api_accepts(
    api, server, provider, session, monkeypatch
):
    server.script(Reply(calls=[("wait", {"seconds": 300})]), Reply(text="Back again."))
    waiting = signal_waits(monkeypatch)
    outcome = {}

    def run():
        outcome["result"] = turn_run(session_id=session, text="wait 300 seconds", provider=provider)

    thread = threading.Thread(target=run)
    thread.start()
    assert waiting.wait(GUARD_SEC), "the wait tool never ran"
    turn_abort(session_id=session)
    thread.join(GUARD_SEC)
    assert outcome["result"].status == "aborted"
    assert len(server.requests) == 1, "the model is not called again after an abort"
    follow_up = turn_run(session_id=session, text="are you there?", provider=provider)
    assert follow_up.status == "completed"
    text, is_error = tool_results_sent(api, server.requests[1])[0]
    assert text.startswith("aborted")
    assert is_error in (None, True)
    assert server.refusals == []


def test_a_stop_mid_answer_keeps_the_words_so_far_before_the_turns_end(server, provider, session):
    # Under load the next piece can be a second away, and a model that thinks before it
    # answers says nothing for longer: the Stop cancels the read where it waits.
    hold = Hold(words=3)
    server.script(Reply(text="one two three four five", hold=hold), Reply(text="Yes?"))
    result, events = stopped_while_the_model_holds(provider, session, hold, "one two three")
    assert result.status == "aborted"
    # What the model said before the Stop, once, then the turn's end: one commit.
    assert [(e.role or e.kind, e.content) for e in result.entries[-2:]] == [
        ("assistant", "one two three"),
        ("turn_end", ""),
    ]
    ends = [e for e in events if e["type"] in ("entry", "agent_end")][-3:]
    assert [e.get("entry").kind if e["type"] == "entry" else e["type"] for e in ends] == [
        "message",
        "turn_end",
        "agent_end",
    ]
    assert ends[-1]["status"] == "aborted"
    follow_up = turn_run(session_id=session, text="still there?", provider=provider)
    assert follow_up.status == "completed"
    assert server.refusals == []


def test_a_stop_before_the_models_first_piece_ends_the_turn_at_once(server, provider, session):
    hold = Hold(words=0)
    server.script(Reply(text="never said", first_hold=hold), Reply(text="Yes?"))
    result, events = stopped_while_the_model_holds(provider, session, hold, "")
    assert result.status == "aborted"
    assert "never said" not in [e.content for e in result.entries]
    assert [e["status"] for e in events if e["type"] == "agent_end"] == ["aborted"]
    follow_up = turn_run(session_id=session, text="still there?", provider=provider)
    assert follow_up.status == "completed"
    assert_history_valid(session)
    assert server.refusals == []


def test_resume_after_a_crash(api, server, provider, session):
    crash_mid_step(session)
    server.script(Reply(text="Sorry, I was interrupted. What next?"))
    result = turn_run(session_id=session, text="hello again", provider=provider)
    assert result.status == "completed"
    assert [text for text, _ in tool_results_sent(api, server.requests[0])] == [
        CRASH_RESULT_TEXT,
        CRASH_RESULT_TEXT,
    ]
    assert server.refusals == []


def test_history_with_a_compaction_entry(api, server, provider, session):
    server.script(
        Reply(text="Hi"),
        Reply(calls=[("calculator", {"expression": "1+1"})]),
        Reply(text="2"),
        Reply(text="You are Ada."),
    )
    turn_run(session_id=session, text="I am Ada", provider=provider)
    turn_run(session_id=session, text="1+1?", provider=provider)
    history = get_store().get_messages(session)
    tool_seq = next(e.seq for e in history if e.role == "tool")
    get_store().append(
        session,
        [
            NewEntry(
                kind="compaction",
                data={
                    "summary": "The user is Ada.",
                    "first_kept_seq": tool_seq,
                    "tokens_before": 99,
                },
            )
        ],
    )
    result = turn_run(session_id=session, text="who am I?", provider=provider)
    assert result.status == "completed"
    sent = str(server.requests[-1]["messages"])
    assert "The user is Ada." in sent and "I am Ada" not in sent
    assert tool_results_sent(api, server.requests[-1])[0][0] == "2"  # call kept with result
    assert server.refusals == []


def test_a_tool_without_executor_gets_an_error_result_the_model_sees(
    api, server, provider, session
):
    server.script(Reply(calls=[("teleport", {"to": "Mars"})]), Reply(text="I cannot teleport."))
    result = turn_run(session_id=session, text="beam me up", provider=provider)
    assert result.status == "completed"
    tool = result.entries[3]
    assert tool.is_error and "teleport" in tool.content
    assert "teleport" in tool_results_sent(api, server.requests[1])[0][0]


def test_provider_error_after_a_tool_ends_the_turn_with_error(server, provider, session):
    server.script(
        Reply(calls=[("calculator", {"expression": "2+2"})]),
        Reply(status=500, error="the model is overloaded"),
        Reply(text="fine now"),
    )
    result = turn_run(session_id=session, text="2+2?", provider=provider)
    assert result.status == "error"
    assert "overloaded" in result.error
    assert result.entries[-1].data == {"status": "error", "error": result.error}
    assert_history_valid(session)
    assert turn_run(session_id=session, text="retry", provider=provider).status == "completed"
    assert server.refusals == []


def test_step_limit_with_a_model_that_keeps_calling_tools(server, provider, session, settings):
    settings.MAX_STEPS = 2
    server.script(*[Reply(calls=[("calculator", {"expression": "1+1"})])] * 2, Reply(text="ok"))
    result = turn_run(session_id=session, text="loop", provider=provider)
    assert result.status == "max_turns"
    assert_history_valid(session)
    assert turn_run(session_id=session, text="and now?", provider=provider).status == "completed"
    assert server.refusals == []


def test_the_fake_server_refuses_broken_histories_like_the_real_apis(server):
    client = openai.OpenAI(api_key="test", base_url=server.openai_url, max_retries=0)
    with pytest.raises(openai.BadRequestError) as refused:
        client.chat.completions.create(
            model="gpt-4o",
            messages=[
                {"role": "user", "content": "hi"},
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "call_1",
                            "type": "function",
                            "function": {"name": "x", "arguments": "{}"},
                        }
                    ],
                },
                {"role": "user", "content": "hello?"},
            ],
        )
    assert refused.value.body["message"].startswith(
        "An assistant message with 'tool_calls' must be followed by tool messages"
    )
    assert refused.value.body["param"] == "messages.[2].role"
    claude = anthropic.Anthropic(api_key="test", base_url=server.base_url, max_retries=0)
    with pytest.raises(anthropic.BadRequestError) as refused:
        claude.messages.create(
            model="claude-haiku-4-5",
            max_tokens=10,
            messages=[
                {"role": "user", "content": "hi"},
                {
                    "role": "assistant",
                    "content": [{"type": "tool_use", "id": "toolu_1", "name": "x", "input": {}}],
                },
                {"role": "user", "content": "hello?"},
            ],
        )
    assert "messages.1: `tool_use` ids were found without `tool_result` blocks" in str(
        refused.value.body
    )
    with pytest.raises(anthropic.BadRequestError, match="roles must alternate"):
        claude.messages.create(
            model="claude-haiku-4-5",
            max_tokens=10,
            messages=[{"role": "user", "content": "a"}, {"role": "user", "content": "b"}],
        )


def test_a_models_first_requests_go_without_a_thread_prepared_at_start_or_at_first_use(
    api, server, provider, session, monkeypatch
):
    """The SDK asks for the platform it reports at a client's first request, in a worker
    thread, and so does every request that starts before the first has its answer: a storm's
    first requests were each a thread hand-off. A model is prepared before its first request
    (a server starting prepares the models it names; another is prepared at its first call)
    and the question is asked once, then."""
    sdk = openai if api == "openai" else anthropic
    handed_off = []
    to_thread = sdk._utils._sync.to_thread

    async def counted(function, *args, **kwargs):
        handed_off.append(function)
        return await to_thread(function, *args, **kwargs)

    monkeypatch.setattr(sdk._utils._sync, "to_thread", counted)
    entries = get_store().append(session, [NewEntry(role="user", content="hi")])
    request = provider.request_body(entries=entries, system_prompt="You are Jarvis.", tools=[])

    async def the_sdks_own_client():
        client = provider._make_async_client(**provider._options)
        async with await provider._open_stream(client, request) as stream:
            async for _ in stream:
                pass
        await client.close()

    async def three_at_once(model):
        await asyncio.gather(
            *(
                model.acomplete(
                    entries=entries,
                    system_prompt="You are Jarvis.",
                    tools=[],
                    on_delta=lambda _: None,
                    abort=threading.Event(),
                )
                for _ in range(3)
            )
        )

    server.script(*(Reply(text="hello") for _ in range(7)))
    asyncio.run(the_sdks_own_client())
    assert handed_off, "the SDK hands the question to a thread when nobody asked it first"

    handed_off.clear()
    met_first_in_a_turn = type(provider)(provider.model, **provider._options)
    asyncio.run(three_at_once(met_first_in_a_turn))
    provider.preload()
    asyncio.run(three_at_once(provider))
    assert handed_off == []
    assert server.refusals == []
