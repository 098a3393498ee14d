"""The OpenAI stream is cut into events by our own reader: the same events as the SDK's
decoder for any stream, however the network cuts it, and the SDK's errors."""

import asyncio
import threading

import pytest
from openai._streaming import SSEDecoder

from sessions_app.runtime.providers.base import ProviderError
from sessions_app.runtime.providers.openai import OpenAIProvider
from sessions_app.runtime.providers.openai_stream import ServerSentEvents
from sessions_app.runtime.turns import turn_run
from sessions_app.store import get_store
from tests.fakes.llm_server import FakeLLMServer, Reply

STREAMS = {
    "chat completions": b'data: {"a": 1}\n\ndata: {"b": "x y"}\n\ndata: [DONE]\n\n',
    "crlf": b'data: {"a": 1}\r\n\r\ndata: {"b": 2}\r\n\r\n',
    "cr": b'data: {"a": 1}\r\rdata: {"b": 2}\r\r',
    "named, multi-line, comments": (
        b": keep-alive\n\nevent: ping\ndata: {}\n\n"
        b"event: message\ndata: line one\ndata: line two\n: note\n\n"
    ),
    "no space after the colon, other fields": b'data:{"a":1}\nid: 7\nretry: 10\nfoo: bar\n\n',
    "an event's end": b"data: x\n\nevent: only-a-name\n\nid: 3\n\ndata: y\n\n",
    "unfinished last event": b'data: {"a": 1}\n\ndata: {"never": "ended"}',
    "utf-8": 'data: {"t": "héllo — 漢字 🙂"}\n\n'.encode(),
}


def events_of(decoder, chunks: list[bytes]) -> list[tuple]:
    async def stream():
        for chunk in chunks:
            yield chunk

    async def read():
        return [event async for event in decoder.aiter_bytes(stream())]

    return asyncio.run(read())


def sdk_events(chunks: list[bytes]) -> list[tuple]:
    return [(sse.event, sse.data) for sse in events_of(SSEDecoder(), chunks)]


@pytest.mark.parametrize("name", STREAMS)
def test_the_same_events_as_the_sdk_wherever_the_stream_is_cut(name):
    stream = STREAMS[name]
    expected = sdk_events([stream])
    assert expected, "the stream has events"
    assert events_of(ServerSentEvents(), [stream]) == expected
    for cut in range(1, len(stream)):
        assert events_of(ServerSentEvents(), [stream[:cut], stream[cut:]]) == expected, cut
    # Every byte on its own: a CRLF and a blank line fall across chunks.
    assert events_of(ServerSentEvents(), [bytes([b]) for b in stream]) == expected


def test_a_long_event_in_small_chunks_arrives_whole():
    # A megabyte of one event, 1 KB at a time: each chunk is searched once, so this costs
    # as much as reading the megabyte (a search from the start would read it a thousand times).
    data = b'data: {"t": "' + b"x" * 1_000_000 + b'"}\n\n'
    chunks = [data[i : i + 1024] for i in range(0, len(data), 1024)]
    assert events_of(ServerSentEvents(), chunks) == [(None, data[6:-2].decode())]


@pytest.fixture
def server():
    with FakeLLMServer() as running:
        yield running


@pytest.fixture
def provider(server):
    return OpenAIProvider("gpt-4o", api_key="test", base_url=server.openai_url, max_retries=0)


def test_an_error_in_the_stream_is_a_provider_error(server, provider):
    server.script(Reply(text="Half an", stream_error="The server had an error"))
    with pytest.raises(ProviderError, match="The server had an error"):
        asyncio.run(
            provider.acomplete(
                entries=[],
                system_prompt="You are Jarvis.",
                tools=[],
                on_delta=lambda _piece: None,
                abort=threading.Event(),
            )
        )


@pytest.mark.django_db(transaction=True)
def test_a_turn_whose_stream_fails_ends_with_the_error_and_stays_usable(server, provider):
    session = get_store().create("test-stream-error").id
    server.script(Reply(text="Half an", stream_error="The server had an error"))
    failed = turn_run(session_id=session, text="hi", provider=provider)
    assert failed.status == "error"
    assert "The server had an error" in failed.entries[-1].data["error"]

    server.script(Reply(text="All good"))
    again = turn_run(session_id=session, text="again", provider=provider)
    assert again.status == "completed"
    assert again.entries[-2].content == "All good"
    assert server.refusals == []
