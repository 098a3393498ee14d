"""The OpenAI stream is cut into events by our own reader: the same events as the SDK's
decoder for any stream, however the network cuts it, and the SDK's errors."""

import asyncio
import contextlib
import gzip
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from openai._streaming import SSEDecoder

from sessions_app.runtime.providers import openai_stream
from sessions_app.runtime.providers.base import ProviderError
from sessions_app.runtime.providers.openai import OpenAIProvider
from sessions_app.runtime.providers.openai_stream import ServerSentEvents
from sessions_app.runtime.turn.turns import turn_run
from sessions_app.store import get_store
from tests.fakes.llm_server import FakeLLMServer, Hold, Reply
from tests.helpers import GUARD_SEC

drained = openai_stream._drained

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


TEXTS = ["one two three", "four five", "six"]
REQUEST = {
    "entries": [],
    "system_prompt": "You are Jarvis.",
    "tools": [],
    "on_delta": lambda _piece: None,
}


def answer_of(provider):
    """One answer through the provider's async path, as a turn asks for it."""
    return asyncio.run(provider.acomplete(**REQUEST, abort=threading.Event()))


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
        answer_of(provider)


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


def test_answers_in_a_row_share_one_connection(monkeypatch):
    # The real APIs keep a connection open after a streamed answer. A stream read to its end
    # (past `[DONE]`, to the chunked body's close) gives it back to the client's pool, so the
    # next turn does not open another: to the real API, no new TCP and TLS handshake.
    # Each body's end is sent only once the client reads on after `[DONE]`: a client that
    # stopped there would have closed the connection by then.
    ends = [Hold(words=0) for _ in range(3)]
    reading_on = iter(ends)

    async def drained_when_the_end_is_sent(events):
        next(reading_on).release()
        await drained(events)

    monkeypatch.setattr(openai_stream, "_drained", drained_when_the_end_is_sent)
    monkeypatch.setattr(openai_stream, "DRAIN_SEC", GUARD_SEC)
    with FakeLLMServer(keep_alive=True) as server:
        provider = OpenAIProvider(
            "gpt-4o", api_key="test", base_url=server.openai_url, max_retries=0
        )
        server.script(
            *(Reply(text=text, end_hold=end) for text, end in zip(TEXTS, ends, strict=True))
        )

        async def answers():
            return [
                (await provider.acomplete(**REQUEST, abort=threading.Event())).text for _ in TEXTS
            ]

        assert asyncio.run(answers()) == TEXTS
        assert server.connections == 1


def test_a_compressed_stream_is_decoded_before_it_is_cut():
    # The transport's bytes are read directly only when the body is not encoded; a gzip body
    # goes through the client's decoding first.
    body = gzip.compress(
        b'data: {"choices": [{"index": 0, "delta": {"content": "zip"}}]}\n\n'
        b'data: {"choices": [{"index": 0, "delta": {"content": "ped"}, "finish_reason": "stop"}]}'
        b"\n\ndata: [DONE]\n\n"
    )

    class Gzipped(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def do_POST(self):  # noqa: N802 - http.server's naming
            self.rfile.read(int(self.headers["Content-Length"]))
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Content-Encoding", "gzip")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    with _provider_of(Gzipped) as provider:
        assert answer_of(provider).text == "zipped"


def test_a_piece_the_fast_reader_refuses_is_read_as_the_standard_library_reads_it():
    """A model's broken unicode (a lone surrogate's escape) and NaN still reach the answer
    as before; what no reader takes is the same error as before."""
    from sessions_app.runtime.providers.openai_stream import _chunk_loads

    for piece in ['{"text": "half \\ud800 a pair"}', '{"n": NaN}', '{"delta": "plain"}']:
        assert repr(_chunk_loads(piece)) == repr(json.loads(piece))
    with pytest.raises(json.JSONDecodeError):
        _chunk_loads('{"cut": "sho')


class _Cut(BaseHTTPRequestHandler):
    """Answers one streamed piece, then either closes the connection in the middle of the
    chunked body (`cut`) or sends nothing more until the client leaves."""

    protocol_version = "HTTP/1.1"
    cut = True
    left = None  # set when the client closed a stalled answer

    def log_message(self, *args):
        pass

    def do_POST(self):  # noqa: N802 - http.server's naming
        self.rfile.read(int(self.headers["Content-Length"]))
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        piece = b'data: {"choices": [{"index": 0, "delta": {"content": "Half"}}]}\n\n'
        self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
        self.wfile.flush()
        if not self.cut:
            self.rfile.read(1)  # returns once the client has closed its end
            type(self).left.set()
        self.close_connection = True


@contextlib.contextmanager
def _provider_of(handler, **options):
    """A provider whose server answers with `handler` (an http.server handler class)."""
    http = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=http.serve_forever, daemon=True).start()
    try:
        yield OpenAIProvider(
            "gpt-4o",
            api_key="test",
            base_url=f"http://127.0.0.1:{http.server_address[1]}/v1",
            max_retries=0,
            **options,
        )
    finally:
        http.shutdown()
        http.server_close()


def _answer_from(handler) -> ProviderError:
    with _provider_of(handler, timeout=0.5) as provider, pytest.raises(ProviderError) as failed:
        answer_of(provider)
    return failed.value


def test_a_connection_cut_mid_answer_is_the_sdks_connection_error():
    # The transport's bytes are read from aiohttp's buffer: its error for a body cut short
    # still reaches the turn as the SDK's own.
    assert str(_answer_from(_Cut)) == "openai: Connection error."


def test_an_answer_that_stalls_past_the_read_timeout_is_the_sdks_timeout():
    class Stalled(_Cut):
        cut = False
        left = threading.Event()

    assert str(_answer_from(Stalled)) == "openai: Request timed out."
    assert Stalled.left.wait(GUARD_SEC), "the stalled connection was closed"


def test_the_request_body_is_the_json_the_sdk_would_send(server, provider):
    # Encoded by orjson and sent as the body's bytes: the server reads the same request.
    server.script(Reply(text="ok"))
    text = 'héllo — 漢字 🙂 "quoted" \\ back'
    answer_of_text = asyncio.run(
        provider.acomplete(
            **{**REQUEST, "entries": [], "system_prompt": text}, abort=threading.Event()
        )
    )
    assert answer_of_text.text == "ok"
    sent = server.requests[-1]
    assert sent["messages"][0] == {"role": "system", "content": text}
    assert sent["stream"] is True
    from sessions_app.runtime.providers.openai import _request_json

    body = {"a": [1, 2.5, None, True], "t": text}
    assert (
        _request_json(body) == json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()
    )
    assert _request_json({"n": 2**70}) == b'{"n":1180591620717411303424}'
