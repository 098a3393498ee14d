"""OpenAI Chat Completions (or any compatible server via OPENAI_BASE_URL), streamed."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager

import openai
import orjson
from openai._utils._json import openapi_dumps

from sessions_app.core.ids import unique_token
from sessions_app.runtime.context.attachments import seeing_parts
from sessions_app.runtime.context.context_window import tokenizer_preload
from sessions_app.runtime.context.history import project_openai, validate_openai
from sessions_app.runtime.providers.base import (
    ModelReply,
    ProviderError,
    SdkProvider,
    sdk_error_text,
)
from sessions_app.runtime.providers.openai_stream import ChunkStream
from sessions_app.store.base import EntryRecord


class _Reply:
    """Assembles one streamed answer from its chunks, each the decoded JSON of one event (the
    same for sync and async streams)."""

    def __init__(self, model: str, on_delta: Callable[[str], None]):
        self.reply = ModelReply(model=model)
        self.on_delta = on_delta
        self.text: list[str] = []
        self.calls: dict[int, dict] = {}

    def feed(self, chunk: dict) -> None:
        usage = chunk.get("usage")
        if usage:
            # Cached prompt tokens are part of prompt_tokens, reasoning of completion_tokens.
            self.reply.usage = {
                "input_tokens": usage.get("prompt_tokens") or 0,
                "output_tokens": usage.get("completion_tokens") or 0,
                "cached_tokens": (usage.get("prompt_tokens_details") or {}).get("cached_tokens")
                or 0,
                "reasoning_tokens": (usage.get("completion_tokens_details") or {}).get(
                    "reasoning_tokens"
                )
                or 0,
            }
        if chunk.get("model"):
            self.reply.model = chunk["model"]
        for choice in chunk.get("choices") or ():
            if choice.get("finish_reason"):
                self.reply.finish_reason = choice["finish_reason"]
            delta = choice.get("delta") or {}
            if delta.get("content"):
                self.text.append(delta["content"])
                self.on_delta(delta["content"])
            for part in delta.get("tool_calls") or ():
                slot = self.calls.setdefault(
                    part.get("index", 0), {"id": "", "name": "", "arguments": ""}
                )
                if part.get("id"):
                    slot["id"] = part["id"]
                function = part.get("function") or {}
                if function.get("name"):
                    slot["name"] = function["name"]
                slot["arguments"] += function.get("arguments") or ""

    def finish(self, *, stopped: bool) -> ModelReply:
        self.reply.stopped = stopped
        self.reply.text = "".join(self.text)
        self.reply.tool_calls = [
            {**slot, "arguments": slot["arguments"] or "{}"}
            for _, slot in sorted(self.calls.items())
            if slot["id"] and slot["name"]
        ]
        return self.reply


def _request_json(request: dict) -> bytes:
    """The request body's JSON, as the SDK would write it (UTF-8, no spaces), by orjson: the
    standard library's encoder took 2% of a storm's CPU on the request's messages and tool
    schemas. What orjson refuses (a lone surrogate, an integer past 64 bits) goes to the
    SDK's own encoder, which sends it or refuses it as before. (A NaN, which no request
    holds, orjson writes as null where the SDK refused it.)"""
    try:
        return orjson.dumps(request)
    except (orjson.JSONEncodeError, TypeError):
        return openapi_dumps(request)


# The request options whose default is the SDK's "not given" (the client's own headers,
# retries and timeout; no parser after the fact).
_NOT_GIVEN_OPTIONS = dict.fromkeys(
    ("headers", "max_retries", "timeout", "post_parser"), openai.NOT_GIVEN
)


class _AsyncOpenAI(openai.AsyncOpenAI):
    """The SDK's async client, its request URLs parsed once: the SDK parses the base URL
    joined with the path for every request (httpx's URL parser, 1–2% of a storm's CPU), and
    the provider asks for one path."""

    _PREPARED_MAX = 16

    def _prepare_url(self, url: str):
        base, prepared = self.__dict__.get("_prepared_urls", (None, None))
        if base is not self._base_url:  # the base URL was changed: parse anew
            base, prepared = self._base_url, {}
            self.__dict__["_prepared_urls"] = (base, prepared)
        found = prepared.get(url)
        if found is None:
            if len(prepared) >= self._PREPARED_MAX:
                prepared.clear()
            found = prepared[url] = super()._prepare_url(url)  # an httpx URL: immutable
        return found


@contextmanager
def _sdk_errors() -> Iterator[None]:
    try:
        yield
    except openai.APIStatusError as error:
        raise ProviderError(
            f"openai {error.status_code}: {sdk_error_text(error)}",
            # OpenAI's refusal of a request longer than the model's window.
            length_refused=error.code == "context_length_exceeded",
        ) from error
    except openai.OpenAIError as error:
        raise ProviderError(f"openai: {error}") from error


class OpenAIProvider(SdkProvider):
    prefix = "openai"

    @property
    def parameters(self) -> dict:
        return {"stream": True, "stream_options": {"include_usage": True}}

    def parameters_for(self, thinking: str) -> dict:
        """Thinking is Chat Completions' `reasoning_effort` (docs/design.md §20). The
        reasoning itself stays with OpenAI: nothing of it is returned or sent back."""
        if thinking == "off":
            return self.parameters
        return {**self.parameters, "reasoning_effort": thinking}

    def preload(self) -> None:
        """Also OpenAI's tokenizer, which counts this model's requests (half a second of
        loading that the first count would pay on the worker's loop)."""
        super().preload()
        tokenizer_preload(self.label)

    def _make_client(self, **options) -> openai.OpenAI:
        return openai.OpenAI(**options)

    def _make_async_client(self, **options) -> openai.AsyncOpenAI:
        # The SDK's aiohttp transport: its C parser reads a streamed answer for about half the
        # CPU of the default one (httpx over anyio), docs/performance.md.
        return _AsyncOpenAI(**options, http_client=openai.DefaultAioHttpClient())

    def _request(
        self, entries: Sequence[EntryRecord], system_prompt: str, tools, parameters: dict
    ) -> dict:
        messages = project_openai(entries, system_prompt, files=seeing_parts)
        validate_openai(messages)
        request: dict = {"model": self.model, "messages": messages, **parameters}
        if tools:
            request["tools"] = [
                {
                    "type": "function",
                    "function": {
                        "name": tool.name,
                        "description": tool.description,
                        "parameters": tool.parameters,
                    },
                }
                for tool in tools
            ]
        return request

    def _open_stream(self, client, request: dict):
        # Two passes of the SDK cost most of a loaded worker's event loop: `create` first
        # walks the whole body against its typed request (every message, every tool
        # schema), and the stream builds a typed model of every chunk (~160 us each, 50 per
        # answer). The body here is complete and validated already (project_openai,
        # validate_openai), and `_Reply` reads four fields of a chunk; so the request goes
        # through `post`, the SDK's call for a ready body (same path, auth, retries and error
        # types as `create`), and its chunks come as the decoded JSON: cast to `object`, which
        # the SDK hands back as it is (`dict` would still be walked key by key).
        # An async stream is cut into events by ChunkStream, for a fraction of the SDK's
        # CPU per chunk (openai_stream).
        stream_class = (
            ChunkStream if isinstance(client, openai.AsyncOpenAI) else openai.Stream[object]
        )
        return client.post(
            "/chat/completions",
            # The body as bytes, the SDK's way to send a body it does not encode itself.
            content=_request_json(request),
            # The SDK would draw this key with uuid4 (a system call on the event loop's
            # thread, core.ids.unique_token); OpenAI is not sent one.
            options={
                "security": {"bearer_auth": True},
                "idempotency_key": unique_token(64),
                # The SDK's own defaults, given: a default left out is deep-copied for every
                # request (pydantic's model_construct), 1–2% of a storm's CPU.
                **_NOT_GIVEN_OPTIONS,
            },
            cast_to=object,
            stream=True,
            stream_cls=stream_class,
        )

    def _answer(self, on_delta: Callable[[str], None]) -> _Reply:
        return _Reply(self.model, on_delta)

    def _sdk_errors(self):
        return _sdk_errors()
