"""A strict local stand-in for the OpenAI and Anthropic HTTP APIs, for the official SDKs.

Serves POST /v1/chat/completions and POST /v1/messages on 127.0.0.1 (streaming SSE and
plain JSON). It answers from a script of replies and refuses, with the providers' real 400
bodies, any history that breaks their rules — checked here independently of the product's
own validators, so a projection bug cannot hide behind itself. With extended thinking on
(`thinking: {type: "enabled", budget_tokens}`), an Anthropic answer starts with a signed
thinking block, and a request that continues a tool use must send that block back first
(Anthropic's rule); OpenAI's `reasoning_effort` is checked for a known value.

    with FakeLLMServer() as server:
        server.script(Reply(calls=[("calculator", {"expression": "2+3"})]), Reply(text="5"))
        ... OpenAI(base_url=server.openai_url, api_key="test") ...
        server.requests  # every request body received, in order

`FakeLLMServer(max_request_chars=N)` refuses every request whose body is longer than N
characters the way each provider refuses a prompt over its model's window (OpenAI: 400
`context_length_exceeded`; Anthropic: 400 `invalid_request_error` "prompt is too long"),
before anything else; `length_refused` lists the sizes it refused.

Unscripted requests get `Reply(text="ok")`, or whatever `FakeLLMServer(responder=...)` returns
for the request body. A reply with `latency` streams its text's words evenly over that many
seconds, paced against a deadline (thread scheduling delays do not add up), so a load
benchmark knows each stream's model time exactly.
"""

from __future__ import annotations

import base64
import contextlib
import json
import re
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from tests.helpers import GUARD_SEC


@dataclass
class Reply:
    text: str = ""
    calls: list[tuple[str, dict]] = field(default_factory=list)
    input_tokens: int = 11
    output_tokens: int = 7
    # Of input_tokens, read from the provider's cache; of output_tokens, reasoning (OpenAI
    # reports both inside the totals, Anthropic its cache reads beside input_tokens).
    cached_tokens: int = 0
    reasoning_tokens: int = 0
    status: int = 200  # anything else: an error response with `error` as its message
    error: str = ""
    delay_per_chunk: float = 0.0
    # Seconds from the request to the last word of the text (streamed replies only).
    latency: float = 0.0
    # A test's hold on the stream: after `hold.words` words it waits for `hold.release()`.
    hold: Hold | None = None
    # After its text, the reply keeps talking (a word every TALK_PAUSE_SEC) until the client
    # stops reading: a model only an abort ends.
    until_stopped: bool = False
    # After its text, the stream carries an error event and ends, as OpenAI's does when the
    # server fails mid-answer (the response's status was 200 already).
    stream_error: str = ""
    # With `keep_alive`: the chunked body's end waits for this hold's release (words unused),
    # so a test knows the client read `[DONE]` before the body ended.
    end_hold: Hold | None = None
    # The response's headers go out, then nothing until this hold's release (words unused):
    # a model that thinks before its first piece.
    first_hold: Hold | None = None


TALK_PAUSE_SEC = 0.02


class Hold:
    """Holds a streamed reply mid-answer until the test releases it, so a test can act while
    an answer is half written (`reached` is set once the first `words` words went out)."""

    def __init__(self, words: int):
        self.words = words
        self.reached = threading.Event()
        self._released = threading.Event()

    def release(self) -> None:
        self._released.set()

    def wait(self) -> None:
        self.reached.set()
        if not self._released.wait(GUARD_SEC):
            raise RuntimeError("the test never released the held reply")


class HistoryRefused(Exception):
    def __init__(self, body: dict):
        super().__init__(json.dumps(body))
        self.body = body


# Image types both APIs take, and the first bytes each must start with.
IMAGE_MAGIC = {
    "image/png": (b"\x89PNG\r\n\x1a\n",),
    "image/jpeg": (b"\xff\xd8\xff",),
    "image/gif": (b"GIF87a", b"GIF89a"),
    "image/webp": (b"RIFF",),
}


# Anthropic's limit on one image, counted on its base64.
ANTHROPIC_IMAGE_MAX_BASE64 = 5 * 1024 * 1024


def image_refusal(media_type: str, data: str) -> str | None:
    """Why an image of this type and base64 data would be refused; None if it would not."""
    if media_type not in IMAGE_MAGIC:
        return f"Image does not match the provided media type {media_type}"
    try:
        raw = base64.b64decode(data, validate=True)
    except ValueError:
        return "Image data is not valid base64"
    if not raw.startswith(IMAGE_MAGIC[media_type]):
        return f"Image does not match the provided media type {media_type}"
    return None


def openai_content_check(messages: list[dict]) -> None:
    """Chat Completions' check of content parts: text, or `image_url` with an http(s) URL or
    a `data:image/<type>;base64,` URL of a real image, with its real error body."""

    def refuse(message: str, index: int):
        raise HistoryRefused(
            {
                "error": {
                    "message": message,
                    "type": "invalid_request_error",
                    "param": f"messages.[{index}].content",
                    "code": "invalid_image_format" if "image" in message.lower() else None,
                }
            }
        )

    for index, message in enumerate(messages):
        content = message.get("content")
        if not isinstance(content, list):
            continue
        for part in content:
            if part.get("type") == "text" and isinstance(part.get("text"), str):
                continue
            if part.get("type") != "image_url" or message["role"] != "user":
                refuse(
                    f"Invalid content part {part.get('type')!r} for role {message['role']}", index
                )
            url = (part.get("image_url") or {}).get("url", "")
            if url.startswith(("https://", "http://")):
                continue
            head, _, data = url.partition(",")
            if not head.startswith("data:") or not head.endswith(";base64"):
                refuse("Invalid image URL: expected a URL or a base64 data URL", index)
            problem = image_refusal(head[len("data:") : -len(";base64")], data)
            if problem:
                refuse(f"Invalid image: {problem}", index)


def anthropic_content_check(messages: list[dict]) -> None:
    """The Messages API's check of image blocks: in user messages only, a base64 source of a
    supported type whose bytes are that type, with its real error body."""

    def refuse(message: str):
        raise HistoryRefused(
            {"type": "error", "error": {"type": "invalid_request_error", "message": message}}
        )

    for index, message in enumerate(messages):
        content = message["content"]
        for position, block in enumerate(content if isinstance(content, list) else []):
            if block.get("type") != "image":
                continue
            where = f"messages.{index}.content.{position}.image"
            if message["role"] != "user":
                refuse(f"{where}: images are only allowed in user messages")
            source = block.get("source") or {}
            if source.get("type") != "base64":
                refuse(
                    f"{where}.source: Input tag {source.get('type')!r} found using 'type' does not match any of the expected tags: 'base64', 'url'"
                )
            problem = image_refusal(source.get("media_type", ""), source.get("data", ""))
            if problem:
                refuse(f"{where}.source.base64: {problem}")
            if len(source["data"]) > ANTHROPIC_IMAGE_MAX_BASE64:
                refuse(
                    f"{where}.source.base64: image exceeds 5 MB maximum: "
                    f"{len(source['data'])} bytes > {ANTHROPIC_IMAGE_MAX_BASE64} bytes"
                )


def openai_check(messages: list[dict]) -> None:
    """The Chat Completions rules on tool calls, with its real error body."""

    def refuse(message: str, index: int):
        raise HistoryRefused(
            {
                "error": {
                    "message": message,
                    "type": "invalid_request_error",
                    "param": f"messages.[{index}].role",
                    "code": None,
                }
            }
        )

    waiting: list[str] = []
    for index, message in enumerate(messages):
        role = message["role"]
        if role == "tool":
            if message.get("tool_call_id") not in waiting:
                refuse(
                    "Invalid parameter: messages with role 'tool' must be a response to a "
                    "preceeding message with 'tool_calls'.",
                    index,
                )
            waiting.remove(message["tool_call_id"])
            continue
        if waiting:
            refuse(
                "An assistant message with 'tool_calls' must be followed by tool messages "
                "responding to each 'tool_call_id'. The following tool_call_ids did not have "
                f"response messages: {', '.join(waiting)}",
                index,
            )
        if role == "assistant" and message.get("tool_calls"):
            waiting = [call["id"] for call in message["tool_calls"]]
        else:
            waiting = []
    if waiting:
        refuse(
            "An assistant message with 'tool_calls' must be followed by tool messages "
            "responding to each 'tool_call_id'. The following tool_call_ids did not have "
            f"response messages: {', '.join(waiting)}",
            len(messages),
        )


THINKING_BLOCKS = ("thinking", "redacted_thinking")


def openai_parameters_check(body: dict) -> None:
    """Chat Completions' check of `reasoning_effort`, with its real error body."""
    effort = body.get("reasoning_effort")
    if effort is not None and effort not in {"minimal", "low", "medium", "high"}:
        raise HistoryRefused(
            {
                "error": {
                    "message": f"Invalid value: '{effort}'. Supported values are: 'minimal', "
                    "'low', 'medium', and 'high'.",
                    "type": "invalid_request_error",
                    "param": "reasoning_effort",
                    "code": "invalid_value",
                }
            }
        )


# Both APIs' rule for a tool's name (OpenAI: 64 characters at most, Anthropic: 1-64).
TOOL_NAME = re.compile(r"[a-zA-Z0-9_-]{1,64}")


def openai_tools_check(body: dict) -> None:
    """Chat Completions' check of the tools' names, with its real error body."""
    for index, tool in enumerate(body.get("tools") or []):
        name = tool.get("function", {}).get("name", "")
        if not TOOL_NAME.fullmatch(name):
            raise HistoryRefused(
                {
                    "error": {
                        "message": f"Invalid 'tools[{index}].function.name': string does not "
                        "match pattern. Expected a string that matches the pattern "
                        "'^[a-zA-Z0-9_-]+$'.",
                        "type": "invalid_request_error",
                        "param": f"tools[{index}].function.name",
                        "code": "invalid_value",
                    }
                }
            )


def anthropic_tools_check(body: dict) -> None:
    """The Messages API's check of the tools' names, with its real error body."""
    for index, tool in enumerate(body.get("tools") or []):
        if not TOOL_NAME.fullmatch(tool.get("name", "")):
            raise HistoryRefused(
                {
                    "type": "error",
                    "error": {
                        "type": "invalid_request_error",
                        "message": f"tools.{index}.custom.name: String should match pattern "
                        "'^[a-zA-Z0-9_-]{1,64}$'",
                    },
                }
            )


def anthropic_thinking(body: dict) -> bool:
    """Whether the request enables extended thinking; refuses a budget the API refuses."""
    thinking = body.get("thinking")
    if not thinking or thinking.get("type") != "enabled":
        return False

    def refuse(message: str):
        raise HistoryRefused(
            {"type": "error", "error": {"type": "invalid_request_error", "message": message}}
        )

    budget = thinking.get("budget_tokens")
    if not isinstance(budget, int) or budget < 1024:
        refuse("thinking.enabled.budget_tokens: Input should be greater than or equal to 1024")
    if body.get("max_tokens", 0) <= budget:
        refuse("`max_tokens` must be greater than `thinking.budget_tokens`.")
    return True


def anthropic_check(messages: list[dict], thinking: bool = False) -> None:
    """The Messages API rules on roles, tool use and (with `thinking`) thinking blocks, with
    its real error body."""

    def refuse(message: str):
        raise HistoryRefused(
            {"type": "error", "error": {"type": "invalid_request_error", "message": message}}
        )

    def blocks(message):
        content = message["content"]
        return [{"type": "text", "text": content}] if isinstance(content, str) else content

    for index, message in enumerate(messages):
        for position, block in enumerate(blocks(message)):
            if block["type"] == "thinking" and not block.get("signature"):
                refuse(f"messages.{index}.content.{position}.thinking.signature: Field required")
    # With thinking on, the assistant message whose tool use the request continues (the one
    # right before the last set of tool results) must start with its thinking block.
    if thinking and len(messages) >= 2 and messages[-1]["role"] == "user":
        continued = messages[-2]
        if any(b["type"] == "tool_result" for b in blocks(messages[-1])) and any(
            b["type"] == "tool_use" for b in blocks(continued)
        ):
            first = blocks(continued)[0]["type"]
            if first not in THINKING_BLOCKS:
                refuse(
                    f"messages.{len(messages) - 2}.content.0.type: Expected `thinking` or "
                    f"`redacted_thinking`, but found `{first}`. When `thinking` is enabled, a "
                    "final `assistant` message must start with a thinking block (preceeding "
                    "the lastmost set of `tool_use` and `tool_result` blocks). We recommend "
                    "you include thinking blocks from previous turns. To avoid this "
                    "requirement, disable `thinking`."
                )

    if not messages or messages[0]["role"] != "user":
        refuse('messages: first message must use the "user" role')
    for index, message in enumerate(messages):
        if index and message["role"] == messages[index - 1]["role"]:
            refuse(
                'messages: roles must alternate between "user" and "assistant", but found '
                f'multiple "{message["role"]}" roles in a row'
            )
        if not blocks(message):
            refuse(
                f"messages.{index}: all messages must have non-empty content except for the "
                "optional final assistant message"
            )
        results = [b["tool_use_id"] for b in blocks(message) if b["type"] == "tool_result"]
        previous_uses = (
            [b["id"] for b in blocks(messages[index - 1]) if b["type"] == "tool_use"]
            if index
            else []
        )
        stray = [r for r in results if r not in previous_uses]
        if stray:
            refuse(
                f"messages.{index}.content.0: unexpected `tool_use_id` found in `tool_result` "
                f"blocks: {', '.join(stray)}. Each `tool_result` block must have a "
                "corresponding `tool_use` block in the previous message."
            )
        uses = [b["id"] for b in blocks(message) if b["type"] == "tool_use"]
        if uses:
            following = blocks(messages[index + 1]) if index + 1 < len(messages) else []
            answered = {b.get("tool_use_id") for b in following if b["type"] == "tool_result"}
            missing = [use for use in uses if use not in answered]
            if missing:
                refuse(
                    f"messages.{index}: `tool_use` ids were found without `tool_result` blocks "
                    f"immediately after: {', '.join(missing)}. Each `tool_use` block must have "
                    "a corresponding `tool_result` block in the next message."
                )


def openai_too_long(size: int, limit: int) -> dict:
    """Chat Completions' body for a prompt over the model's window (sizes in characters
    here, in tokens there)."""
    return {
        "error": {
            "message": f"This model's maximum context length is {limit} tokens. However, your "
            f"messages resulted in {size} tokens. Please reduce the length of the messages.",
            "type": "invalid_request_error",
            "param": "messages",
            "code": "context_length_exceeded",
        }
    }


def anthropic_too_long(size: int, limit: int) -> dict:
    """The Messages API's body for a prompt over the model's window."""
    return {
        "type": "error",
        "error": {
            "type": "invalid_request_error",
            "message": f"prompt is too long: {size} tokens > {limit} maximum",
        },
    }


def openai_usage(reply: Reply) -> dict:
    """Chat Completions' usage of a reply, cached and reasoning tokens inside the totals."""
    return {
        "prompt_tokens": reply.input_tokens,
        "completion_tokens": reply.output_tokens,
        "total_tokens": reply.input_tokens + reply.output_tokens,
        "prompt_tokens_details": {"cached_tokens": reply.cached_tokens},
        "completion_tokens_details": {"reasoning_tokens": reply.reasoning_tokens},
    }


def paced(pieces: list[str], latency: float, started: float):
    """Yield the pieces so that piece i of n leaves at started + latency * (i + 1) / n."""
    for index, piece in enumerate(pieces):
        if latency:
            wait = started + latency * (index + 1) / len(pieces) - time.monotonic()
            if wait > 0:
                time.sleep(wait)
        yield index, piece


class _Server(ThreadingHTTPServer):
    # A load benchmark opens hundreds of streams at once; the default backlog of 5 would
    # drop their connection attempts into TCP's one-second retries.
    request_queue_size = 1024


class FakeLLMServer:
    def __init__(
        self,
        responder: Callable[[dict], Reply] | None = None,
        *,
        max_request_chars: int | None = None,
        keep_alive: bool = False,
    ):
        self._responder = responder
        self.max_request_chars = max_request_chars
        # As the real APIs: a streamed answer in a chunked body on a connection that stays
        # open for the next request. Otherwise each answer closes its connection.
        self.keep_alive = keep_alive
        self.connections = 0  # TCP connections accepted
        self.length_refused: list[int] = []  # sizes of the requests refused as too long
        # Size in characters of each answered request, in the order of `requests`.
        self.request_chars: list[int] = []
        self._replies: deque[Reply] = deque()
        self._lock = threading.Lock()
        self.requests: list[dict] = []
        self.refusals: list[dict] = []
        # For each reply with a latency: seconds its last word left after its deadline.
        self.lateness: list[float] = []
        self.unauthenticated = 0  # requests refused for carrying no API key
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def setup(self):
                super().setup()
                with server._lock:
                    server.connections += 1

            def do_POST(self):  # noqa: N802 - http.server's naming
                length = int(self.headers["Content-Length"])
                raw = self.rfile.read(length)
                if len(raw) < length:
                    self.close_connection = True
                    return  # the client went away before sending its whole request
                body = json.loads(raw)
                size = len(raw.decode())
                path = self.path.split("?")[0]
                # Like the real APIs: a request without a key gets a 401, never an answer.
                # (Anthropic takes `x-api-key` or a bearer token; its SDK sends either.)
                bearer = self.headers.get("Authorization", "").removeprefix("Bearer ").strip()
                if not (bearer or self.headers.get("x-api-key")):
                    server.unauthenticated += 1
                    self._json(401, {"error": {"message": "missing API key"}})
                elif server.max_request_chars is not None and size > server.max_request_chars:
                    server.length_refused.append(size)
                    too_long = (
                        openai_too_long
                        if path.endswith("/chat/completions")
                        else anthropic_too_long
                    )
                    self._json(400, too_long(size, server.max_request_chars))
                elif path.endswith("/chat/completions"):
                    server._openai(self, body, size)
                elif path.endswith("/v1/messages"):
                    server._anthropic(self, body, size)
                else:
                    self._json(404, {"error": {"message": f"no route {path}"}})

            def _json(self, status: int, payload: dict):
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _sse(self, events, delay: float, end_hold: Hold | None = None):
                chunked = server.keep_alive
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Cache-Control", "no-cache")
                if chunked:
                    self.send_header("Transfer-Encoding", "chunked")
                else:
                    self.send_header("Connection", "close")
                    self.close_connection = True
                self.end_headers()
                try:
                    for event in events:
                        data = event.encode()
                        if chunked:
                            data = b"%x\r\n%s\r\n" % (len(data), data)
                        self.wfile.write(data)
                        self.wfile.flush()
                        if delay:
                            time.sleep(delay)
                    if chunked:
                        # The body's end in a write of its own, after the last event: a
                        # client that stops reading at `[DONE]` leaves it unread.
                        if end_hold is not None:
                            end_hold.wait()
                        self.wfile.write(b"0\r\n\r\n")
                        self.wfile.flush()
                except (BrokenPipeError, ConnectionResetError):
                    self.close_connection = True  # the client stopped reading (an abort)

        self._http = _Server(("127.0.0.1", 0), Handler)
        self._http.daemon_threads = True
        self._thread = threading.Thread(
            target=self._http.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    # --- lifecycle ------------------------------------------------------------------------
    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._http.shutdown()
        self._http.server_close()

    @property
    def base_url(self) -> str:
        host, port = self._http.server_address[:2]
        return f"http://{host}:{port}"

    @property
    def openai_url(self) -> str:
        return self.base_url + "/v1"

    def script(self, *replies: Reply) -> None:
        with self._lock:
            self._replies.extend(replies)

    def _next(self, body: dict, size: int) -> Reply:
        with self._lock:
            self.requests.append(body)
            self.request_chars.append(size)
            if self._replies:
                return self._replies.popleft()
        return self._responder(body) if self._responder else Reply(text="ok")

    # --- OpenAI Chat Completions ----------------------------------------------------------
    def _openai(self, handler, body, size):
        try:
            openai_parameters_check(body)
            openai_tools_check(body)
            openai_check(body["messages"])
            openai_content_check(body["messages"])
        except HistoryRefused as refused:
            self.refusals.append(refused.body)
            return handler._json(400, refused.body)
        started = time.monotonic()
        reply = self._next(body, size)
        if reply.status != 200:
            return handler._json(
                reply.status,
                {
                    "error": {
                        "message": reply.error,
                        "type": "server_error",
                        "param": None,
                        "code": None,
                    }
                },
            )
        completion_id = f"chatcmpl-{uuid.uuid4().hex[:12]}"
        calls = [
            {
                "id": f"call_{uuid.uuid4().hex[:20]}",
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(args)},
            }
            for name, args in reply.calls
        ]
        usage = openai_usage(reply)
        finish = "tool_calls" if calls else "stop"
        if not body.get("stream"):
            return handler._json(
                200,
                {
                    "id": completion_id,
                    "object": "chat.completion",
                    "created": int(time.time()),
                    "model": body["model"],
                    "choices": [
                        {
                            "index": 0,
                            "message": {
                                "role": "assistant",
                                "content": reply.text or None,
                                **({"tool_calls": calls} if calls else {}),
                            },
                            "finish_reason": finish,
                        }
                    ],
                    "usage": usage,
                },
            )

        def chunk(delta=None, finish_reason=None, usage_value=None, choices=True):
            payload = {
                "id": completion_id,
                "object": "chat.completion.chunk",
                "created": int(time.time()),
                "model": body["model"],
                "choices": (
                    [{"index": 0, "delta": delta or {}, "finish_reason": finish_reason}]
                    if choices
                    else []
                ),
            }
            if usage_value is not None:
                payload["usage"] = usage_value
            return f"data: {json.dumps(payload)}\n\n"

        def events():
            if reply.first_hold is not None:
                reply.first_hold.wait()
            yield chunk({"role": "assistant", "content": ""})
            words = reply.text.split(" ") if reply.text else []
            for index, word in paced(words, reply.latency, started):
                if reply.hold is not None and index == reply.hold.words:
                    reply.hold.wait()
                yield chunk({"content": word if index == 0 else " " + word})
            if reply.latency:
                self.lateness.append(time.monotonic() - started - reply.latency)
            talk_until = time.monotonic() + GUARD_SEC
            while reply.until_stopped and time.monotonic() < talk_until:
                time.sleep(TALK_PAUSE_SEC)
                yield chunk({"content": " more"})
            if reply.stream_error:
                failure = {"message": reply.stream_error, "type": "server_error"}
                yield f"data: {json.dumps({'error': failure})}\n\n"
                return
            for index, call in enumerate(calls):
                arguments = call["function"]["arguments"]
                yield chunk(
                    {
                        "tool_calls": [
                            {
                                "index": index,
                                "id": call["id"],
                                "type": "function",
                                "function": {"name": call["function"]["name"], "arguments": ""},
                            }
                        ]
                    }
                )
                half = len(arguments) // 2
                for part in (arguments[:half], arguments[half:]):
                    yield chunk({"tool_calls": [{"index": index, "function": {"arguments": part}}]})
            yield chunk({}, finish_reason=finish)
            if (body.get("stream_options") or {}).get("include_usage"):
                yield chunk(usage_value=usage, choices=False)
            yield "data: [DONE]\n\n"

        handler._sse(events(), reply.delay_per_chunk, reply.end_hold)

    # --- Anthropic Messages ---------------------------------------------------------------
    def _anthropic(self, handler, body, size):
        try:
            thinking = anthropic_thinking(body)
            anthropic_tools_check(body)
            anthropic_check(body["messages"], thinking=thinking)
            anthropic_content_check(body["messages"])
        except HistoryRefused as refused:
            self.refusals.append(refused.body)
            return handler._json(400, refused.body)
        started = time.monotonic()
        reply = self._next(body, size)
        if reply.status != 200:
            return handler._json(
                reply.status,
                {"type": "error", "error": {"type": "api_error", "message": reply.error}},
            )
        message_id = f"msg_{uuid.uuid4().hex[:20]}"
        content = []
        if thinking:
            # Thinking comes first, signed: the signature is what the API checks when the
            # block is sent back.
            content.append(
                {
                    "type": "thinking",
                    "thinking": f"Thinking about request {len(self.requests)}.",
                    "signature": f"sig_{uuid.uuid4().hex}",
                }
            )
        if reply.text:
            content.append({"type": "text", "text": reply.text})
        for name, args in reply.calls:
            content.append(
                {
                    "type": "tool_use",
                    "id": f"toolu_{uuid.uuid4().hex[:20]}",
                    "name": name,
                    "input": args,
                }
            )
        stop = "tool_use" if reply.calls else "end_turn"
        usage = {"input_tokens": reply.input_tokens, "output_tokens": reply.output_tokens}
        if not body.get("stream"):
            return handler._json(
                200,
                {
                    "id": message_id,
                    "type": "message",
                    "role": "assistant",
                    "model": body["model"],
                    "content": content,
                    "stop_reason": stop,
                    "stop_sequence": None,
                    "usage": usage,
                },
            )

        def event(kind, payload):
            return f"event: {kind}\ndata: {json.dumps({'type': kind, **payload})}\n\n"

        def events():
            if reply.first_hold is not None:
                reply.first_hold.wait()
            yield event(
                "message_start",
                {
                    "message": {
                        "id": message_id,
                        "type": "message",
                        "role": "assistant",
                        "model": body["model"],
                        "content": [],
                        "stop_reason": None,
                        "stop_sequence": None,
                        "usage": {
                            "input_tokens": reply.input_tokens - reply.cached_tokens,
                            "cache_read_input_tokens": reply.cached_tokens,
                            "output_tokens": 1,
                        },
                    }
                },
            )
            yield event("ping", {})
            for index, block in enumerate(content):
                if block["type"] == "thinking":
                    yield event(
                        "content_block_start",
                        {
                            "index": index,
                            "content_block": {"type": "thinking", "thinking": "", "signature": ""},
                        },
                    )
                    for piece in (block["thinking"][:8], block["thinking"][8:]):
                        yield event(
                            "content_block_delta",
                            {
                                "index": index,
                                "delta": {"type": "thinking_delta", "thinking": piece},
                            },
                        )
                    yield event(
                        "content_block_delta",
                        {
                            "index": index,
                            "delta": {"type": "signature_delta", "signature": block["signature"]},
                        },
                    )
                elif block["type"] == "text":
                    yield event(
                        "content_block_start",
                        {"index": index, "content_block": {"type": "text", "text": ""}},
                    )
                    words = block["text"].split(" ")
                    for position, word in paced(words, reply.latency, started):
                        if reply.hold is not None and position == reply.hold.words:
                            reply.hold.wait()
                        piece = word if position == 0 else " " + word
                        yield event(
                            "content_block_delta",
                            {"index": index, "delta": {"type": "text_delta", "text": piece}},
                        )
                    if reply.latency:
                        self.lateness.append(time.monotonic() - started - reply.latency)
                else:
                    yield event(
                        "content_block_start",
                        {"index": index, "content_block": {**block, "input": {}}},
                    )
                    arguments = json.dumps(block["input"])
                    half = len(arguments) // 2
                    for part in (arguments[:half], arguments[half:]):
                        yield event(
                            "content_block_delta",
                            {
                                "index": index,
                                "delta": {"type": "input_json_delta", "partial_json": part},
                            },
                        )
                yield event("content_block_stop", {"index": index})
            yield event(
                "message_delta",
                {
                    "delta": {"stop_reason": stop, "stop_sequence": None},
                    "usage": {"output_tokens": reply.output_tokens},
                },
            )
            yield event("message_stop", {})

        handler._sse(events(), reply.delay_per_chunk, reply.end_hold)


@contextlib.contextmanager
def serving_both_sdks(settings, **options):
    """A FakeLLMServer that the OpenAI and Anthropic providers of `settings` (pytest-django's
    fixture) both talk to, for a test that picks its model by name."""
    with FakeLLMServer(**options) as running:
        settings.OPENAI_BASE_URL = running.openai_url
        settings.OPENAI_API_KEY = "test"
        settings.ANTHROPIC_BASE_URL = running.base_url
        settings.ANTHROPIC_API_KEY = "test"
        yield running


@contextlib.contextmanager
def serving_the_apps_model(settings, model: str = "openai:gpt-4o-mini", **options):
    """`serving_both_sdks`, and the app's model (`JARVIS_MODEL`, every new session's) is
    `model` on it: a test's turns reach the fake through the official SDK."""
    with serving_both_sdks(settings, **options) as running:
        settings.JARVIS_MODEL = model
        yield running
