"""A fake OpenAI Chat Completions server for load: hundreds of paced streams on one event loop.

The benchmark's model (bench/turn_load.py) shares the machine with the system it measures. A
real provider costs that machine nothing; `FakeLLMServer` spends a thread per stream, and with
400 streams their wake-ups and their fight for the interpreter's lock took about a third of
what the workers themselves used, and made the fake late (docs/performance.md). This server
keeps the same rules (the checks of tests/fakes/llm_server.py, the same chunks, the same
401 without a key) for the part of the API a streamed text answer uses, and paces every
stream from one event loop in a thread of its own.

What it does not do (the tests' `FakeLLMServer` does): tool calls, holds, errors mid-stream,
non-streamed answers, the Anthropic API, keep-alive. Each answer closes its connection, as
`FakeLLMServer` does by default.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Callable

from tests.fakes.llm_server import (
    HistoryRefused,
    Reply,
    openai_check,
    openai_content_check,
    openai_parameters_check,
    openai_usage,
)

MAX_HEAD_BYTES = 64 * 1024


class PacedStreamServer:
    """`with PacedStreamServer(responder) as server:` serves on `server.openai_url` until the
    block ends. `responder(body) -> Reply` uses `text`, `latency` and the token counts."""

    def __init__(self, responder: Callable[[dict], Reply]):
        self._responder = responder
        # For each reply with a latency: seconds its last word left after its deadline.
        self.lateness: list[float] = []
        self.connections = 0
        self._loop = asyncio.new_event_loop()
        self._server: asyncio.base_events.Server | None = None
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)

    # --- lifecycle ------------------------------------------------------------------------
    def __enter__(self):
        self._thread.start()
        started = asyncio.run_coroutine_threadsafe(self._start(), self._loop)
        self._server = started.result(timeout=30)
        return self

    def __exit__(self, *exc):
        asyncio.run_coroutine_threadsafe(self._stop(), self._loop).result(timeout=30)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=30)
        self._loop.close()

    async def _start(self):
        # A storm opens hundreds of connections at once: a short backlog would drop them into
        # TCP's one-second retries.
        return await asyncio.start_server(
            self._serve, "127.0.0.1", 0, backlog=1024, limit=MAX_HEAD_BYTES
        )

    async def _stop(self):
        self._server.close()
        for task in asyncio.all_tasks():
            if task is not asyncio.current_task():
                task.cancel()

    @property
    def openai_url(self) -> str:
        host, port = self._server.sockets[0].getsockname()[:2]
        return f"http://{host}:{port}/v1"

    # --- one connection, one request --------------------------------------------------------
    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter):
        self.connections += 1
        try:
            request = await _read_request(reader)

            if request is not None:
                await self._answer(writer, *request)
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            pass  # the client went away, or sent what no SDK sends
        finally:
            writer.close()

    async def _answer(self, writer, path: str, headers: dict[str, str], raw: bytes):
        bearer = headers.get("authorization", "").removeprefix("Bearer ").strip()
        if not bearer:
            return _json(writer, 401, {"error": {"message": "missing API key"}})
        if not path.split("?")[0].endswith("/chat/completions"):
            return _json(writer, 404, {"error": {"message": f"no route {path}"}})
        body = json.loads(raw)
        try:
            openai_parameters_check(body)
            openai_check(body["messages"])
            openai_content_check(body["messages"])
        except HistoryRefused as refused:
            return _json(writer, 400, refused.body)
        if not body.get("stream"):
            return _json(writer, 400, {"error": {"message": "this fake only streams"}})
        started = time.monotonic()
        reply = self._responder(body)
        await self._stream(writer, body, reply, started)

    async def _stream(self, writer, body: dict, reply: Reply, started: float):
        head = {
            "id": f"chatcmpl-{id(writer):x}",
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": body["model"],
        }

        def chunk(delta=None, finish_reason=None, usage=None, choices=True) -> bytes:
            payload = dict(head)
            payload["choices"] = (
                [{"index": 0, "delta": delta or {}, "finish_reason": finish_reason}]
                if choices
                else []
            )
            if usage is not None:
                payload["usage"] = usage
            return b"data: %s\n\n" % json.dumps(payload).encode()

        writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
            b"Cache-Control: no-cache\r\nConnection: close\r\n\r\n"
            + chunk({"role": "assistant", "content": ""})
        )
        words = reply.text.split(" ") if reply.text else []
        for index, word in enumerate(words):
            if reply.latency:
                # Piece i of n leaves at started + latency * (i + 1) / n, as FakeLLMServer's.
                wait = started + reply.latency * (index + 1) / len(words) - time.monotonic()
                if wait > 0:
                    await asyncio.sleep(wait)
            if writer.is_closing():
                return  # the client stopped reading (an abort)
            writer.write(chunk({"content": word if index == 0 else " " + word}))
        if reply.latency:
            self.lateness.append(time.monotonic() - started - reply.latency)
        tail = chunk({}, finish_reason="stop")
        if (body.get("stream_options") or {}).get("include_usage"):
            tail += chunk(usage=openai_usage(reply), choices=False)
        if not writer.is_closing():
            writer.write(tail + b"data: [DONE]\n\n")
            await writer.drain()


async def _read_request(reader: asyncio.StreamReader):
    """(path, lower-cased headers, body) of one request with a Content-Length, or None."""
    head = await reader.readuntil(b"\r\n\r\n")
    start, *lines = head.decode("latin-1").split("\r\n")
    method, path, _ = start.split(" ", 2)
    headers = {}
    for line in lines:
        name, _, value = line.partition(":")
        if name:
            headers[name.strip().lower()] = value.strip()
    if method != "POST" or "content-length" not in headers:
        return None
    return path, headers, await reader.readexactly(int(headers["content-length"]))


def _json(writer: asyncio.StreamWriter, status: int, payload: dict) -> None:
    data = json.dumps(payload).encode()
    reason = {400: "Bad Request", 401: "Unauthorized", 404: "Not Found"}[status]
    writer.write(
        f"HTTP/1.1 {status} {reason}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(data)}\r\nConnection: close\r\n\r\n".encode()
        + data
    )
