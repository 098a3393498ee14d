"""A Chat Completions stream read for a fraction of the SDK's CPU per chunk.

The SDK reads a stream line by line: a regular expression per chunk, a bytearray per line, a
string and a call per field, then a typed check of every event. A streamed answer is ~50
events of one `data:` line each; decoding them (with their JSON) took 520–610 µs per answer
this way, 340–390 µs with ours (docs/performance.md). `ChunkStream` is still the SDK's stream
class, made by the SDK's own request path: the same response, the same errors for a cut
connection or a timeout (its `_iter_events`), the same error for an `error` in the stream,
the response closed however the reading ends. Only the cutting into events is ours.
"""

from __future__ import annotations

import asyncio
import json
import ssl
from collections.abc import AsyncIterator

import httpx2
import openai
import orjson
from httpx2._client import BoundAsyncStream
from openai._vendor.httpx_aiohttp.transport import AiohttpResponseStream, map_aiohttp_exceptions

_BLANK_LINE = b"\n\n"
# How long the end of a finished answer is waited for (the SDK waits as long).
DRAIN_SEC = 0.1
_DATA_LINE = b"data: "


class ServerSentEvents:
    """The events of a byte stream (the `text/event-stream` format), as the SDK's SSEDecoder
    reads them: a blank line ends an event; `data` lines are joined with newlines; `event`
    names it; comments and other fields are skipped. Lines may end in LF, CRLF or CR.

    Each event is `(name or None, data)`: `feed` each chunk in order, then `end`. Time is
    linear in the bytes: each chunk is searched once, wherever an event's end falls."""

    def __init__(self):
        self.pending = bytearray()
        self.held_cr = False  # a chunk ended in CR: the next may begin with the LF of a CRLF

    def feed(self, chunk: bytes) -> list[tuple]:
        """The events `chunk` completes."""
        if self.held_cr:
            chunk = b"\r" + chunk
        self.held_cr = chunk.endswith(b"\r")
        if self.held_cr:
            chunk = chunk[:-1]
        return _events(self.pending, chunk)

    def end(self) -> list[tuple]:
        """The events the stream's end completes: its last CR ends a line after all. (The SDK
        dispatches an event only at a blank line: an unfinished last one is dropped.)"""
        return _events(self.pending, b"\n") if self.held_cr else []

    async def aiter_bytes(self, chunks: AsyncIterator[bytes]) -> AsyncIterator[tuple]:
        async for chunk in chunks:
            for event in self.feed(chunk):
                yield event
        for event in self.end():
            yield event


def _events(pending: bytearray, chunk: bytes) -> list[tuple]:
    """The events `chunk` completes; what follows the last of them stays in `pending`."""
    if b"\r" in chunk:
        chunk = chunk.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
    seam = max(len(pending) - 1, 0)  # a blank line may straddle two chunks
    pending += chunk
    if pending.find(_BLANK_LINE, seam) < 0:
        return []
    *blocks, rest = pending.split(_BLANK_LINE)
    pending[:] = rest
    return [event for event in map(_event, blocks) if event is not None]


def _event(block: bytes) -> tuple[str | None, str] | None:
    if block.startswith(_DATA_LINE) and b"\n" not in block:
        return None, block[len(_DATA_LINE) :].decode()  # the usual chunk: one data line
    name = None
    data = []
    seen = False
    for line in block.split(b"\n"):
        if not line or line.startswith(b":"):
            continue
        field, _, value = line.partition(b":")
        if value.startswith(b" "):
            value = value[1:]
        if field == b"data":
            data.append(value.decode())
            seen = True
        elif field == b"event":
            name = value.decode() or None
            seen = True
        elif field in (b"id", b"retry"):
            seen = True
    return (name, "\n".join(data)) if seen else None


class ChunkStream(openai.AsyncStream[object]):
    """The SDK's async stream of a chat completion's chunks, each the decoded JSON object.

    One generator from the response's bytes to the chunks: each layer of generators a piece
    goes through is a resumption per piece, fifty pieces an answer (docs/performance.md)."""

    def __aiter__(self) -> AsyncIterator[object]:
        # The SDK's `__aiter__` re-yields every chunk through a generator of its own.
        return self._iterator

    def _body(self) -> AsyncIterator[bytes]:
        """The response's bytes. Unencoded (what the API sends), they are read straight from
        its transport, as the SDK's own drain reads them: httpx's decoding and re-chunking
        layers cost a step per piece and do nothing to plain bytes. Over the SDK's aiohttp
        transport they are read from aiohttp's own buffer (`_aiohttp_body`)."""
        response = self.response
        if response.headers.get("content-encoding", "identity").lower() != "identity":
            return response.aiter_bytes()
        stream = response.stream
        if isinstance(stream, BoundAsyncStream) and isinstance(
            stream._stream, AiohttpResponseStream
        ):
            return _aiohttp_body(stream._stream._aiohttp_response.content)
        return stream.__aiter__()

    async def __stream__(self) -> AsyncIterator[object]:
        response = self.response
        body = self._body()
        events = ServerSentEvents()
        try:
            # The SDK's errors for a stream cut or timed out, as its own `_iter_events` raises them.
            try:
                async for raw in body:
                    for _name, data in events.feed(raw):
                        if data.startswith("[DONE]"):
                            await _drained(body)
                            return
                        yield _chunk(data, response)
                for _name, data in events.end():
                    if data.startswith("[DONE]"):
                        return
                    yield _chunk(data, response)
            except httpx2.TimeoutException as error:
                raise openai.APITimeoutError(request=response.request) from error
            except (httpx2.RequestError, ssl.SSLError) as error:
                raise openai.APIConnectionError(request=response.request) from error
        finally:
            await response.aclose()


async def _aiohttp_body(content) -> AsyncIterator[bytes]:
    """What aiohttp has received of the body, as it arrives, with the transport's errors
    (`map_aiohttp_exceptions`): what the transport's stream yields, one generator instead of
    three (httpx's timing wrapper, the transport's stream, aiohttp's chunk iterator), each a
    resumption per piece of every answer. The response is closed by its own `aclose`."""
    while True:
        try:
            raw = await content.readany()
        except Exception:
            with map_aiohttp_exceptions():
                raise
        if not raw:
            return
        yield raw


def _chunk(data: str, response) -> object:
    """One event's chunk; the SDK's error for an `error` the stream sends instead."""
    chunk = _chunk_loads(data)
    if isinstance(chunk, dict) and chunk.get("error"):
        error = chunk["error"]
        message = error.get("message") if isinstance(error, dict) else None
        raise openai.APIError(
            message=message
            if isinstance(message, str) and message
            else "An error occurred during streaming",
            request=response.request,
            body=error,
        )
    return chunk


def _chunk_loads(data: str):
    """A stream's piece as JSON: orjson reads one in a third of the standard library's time
    (fifty pieces an answer). What it refuses (a lone surrogate's escape, NaN) the standard
    library reads, or refuses with the same error as before."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return json.loads(data)


async def _drained(body: AsyncIterator[bytes]) -> None:
    """Read what follows `[DONE]` (the end of the chunked body), briefly, as the SDK does: a
    response read to its end gives its connection back to the pool, so the next turn's
    request does not open a new one (and, to the real API, a new TLS session)."""
    try:
        async with asyncio.timeout(DRAIN_SEC):
            async for _ in body:
                pass
    except (TimeoutError, httpx2.HTTPError, ssl.SSLError):
        pass  # what was answered stands; the connection is closed instead of kept
