"""The first model call of a turn started at once runs on an event loop of its own
(runtime.loop.beside, docs/design.md §26): under a storm the worker's loop takes 0.2–1 s a pass,
and a request waits for several passes before its first piece. Its answer still arrives
whole and in order on the turn's loop, its errors are the turn's, a Stop keeps the words so
far, and a cancel closes the request."""

import asyncio
import contextvars
import threading

import pytest

from sessions_app.runtime.loop.beside import first_call_beside, stream_beside
from sessions_app.runtime.providers.anthropic import AnthropicProvider
from sessions_app.runtime.providers.openai import OpenAIProvider
from sessions_app.runtime.turn.turns import turn_run
from sessions_app.store import NewEntry, get_store
from tests.fakes.llm_server import FakeLLMServer, Hold, Reply
from tests.helpers import GUARD_SEC

from .conftest import assert_history_valid, stopped_while_the_model_holds

PIECES = 100


@pytest.mark.anyio
async def test_pieces_are_read_beside_and_fed_on_the_callers_loop_in_order():
    read_on, fed_on, fed = set(), set(), []

    async def pieces():
        for index in range(PIECES):
            read_on.add(threading.current_thread().name)
            yield index
            await asyncio.sleep(0)

    def feed(piece):
        fed_on.add(threading.current_thread().name)
        fed.append(piece)

    async with asyncio.timeout(GUARD_SEC):
        await stream_beside(pieces, feed)
    assert fed == list(range(PIECES))
    assert read_on == {"jarvis-beside"}
    assert fed_on == {threading.current_thread().name}


@pytest.mark.anyio
async def test_an_error_while_reading_is_raised_in_the_caller_after_the_pieces_before_it():
    async def pieces():
        yield "one"
        raise ConnectionResetError("the model went away")

    fed = []
    with pytest.raises(ConnectionResetError, match="went away"):
        async with asyncio.timeout(GUARD_SEC):
            await stream_beside(pieces, fed.append)
    assert fed == ["one"]


@pytest.mark.anyio
async def test_cancelling_the_caller_closes_the_reading():
    closed = threading.Event()
    first_fed = asyncio.Event()

    async def pieces():
        try:
            yield "one"
            await asyncio.Event().wait()  # a model that says nothing more
        finally:
            closed.set()

    streaming = asyncio.ensure_future(stream_beside(pieces, lambda _: first_fed.set()))
    async with asyncio.timeout(GUARD_SEC):
        await first_fed.wait()
    streaming.cancel()
    with pytest.raises(asyncio.CancelledError):
        await streaming
    assert await asyncio.to_thread(closed.wait, GUARD_SEC)


# --- through the official SDKs ------------------------------------------------------------


@pytest.fixture
def server():
    with FakeLLMServer() as running:
        yield running


@pytest.fixture(params=["openai", "anthropic"])
def provider(request, server):
    if request.param == "openai":
        model = OpenAIProvider("gpt-4o", api_key="test", base_url=server.openai_url, max_retries=0)
    else:
        model = AnthropicProvider(
            "claude-haiku-4-5", api_key="test", base_url=server.base_url, max_retries=0
        )
    # Prepared, as a server prepares every model it names as it starts (providers_preload):
    # a model met first in a turn is prepared in a thread, then the turn's loop goes on.
    model.preload()
    return model


@pytest.mark.django_db(transaction=True)
def test_the_first_call_reaches_the_model_while_the_turns_loop_is_busy(server, provider):
    entries = get_store().append(
        get_store().create("beside-sdk").id, [NewEntry(role="user", content="hi")]
    )
    hold = Hold(words=0)
    server.script(Reply(text="first answer", first_hold=hold), Reply(text="second answer"))

    def call():
        return provider.acomplete(
            entries=entries,
            system_prompt="You are Jarvis.",
            tools=[],
            on_delta=lambda _: None,
            abort=threading.Event(),
        )

    async def turn():
        first = asyncio.ensure_future(call())
        await asyncio.sleep(0)  # its first step: the request leaves for the side loop
        # The turn's loop is busy (blocked here): the request reaches the model all the same.
        reached = hold.reached.wait(GUARD_SEC)
        hold.release()
        assert reached, "the request waited for the turn's loop"
        texts = [(await first).text]
        # The turn's next call is made on its own loop, as every other turn's.
        texts.append((await call()).text)
        assert asyncio.get_running_loop() in provider._async_clients
        return texts

    context = contextvars.copy_context()
    first_call_beside(context)
    assert context.run(asyncio.run, turn()) == ["first answer", "second answer"]
    assert server.refusals == []


@pytest.mark.django_db(transaction=True)
def test_a_stop_while_the_first_call_runs_beside_keeps_the_words_so_far(server, provider):
    session = get_store().create("beside-stop").id
    hold = Hold(words=3)
    server.script(Reply(text="one two three four five", hold=hold), Reply(text="Yes?"))
    context = contextvars.copy_context()
    first_call_beside(context)
    result, _ = stopped_while_the_model_holds(provider, session, hold, "one two three", context)
    assert result.status == "aborted"
    assert [(e.role or e.kind, e.content) for e in result.entries[-2:]] == [
        ("assistant", "one two three"),
        ("turn_end", ""),
    ]
    follow_up = turn_run(session_id=session, text="still there?", provider=provider)
    assert follow_up.status == "completed"
    assert_history_valid(session)
    assert server.refusals == []
