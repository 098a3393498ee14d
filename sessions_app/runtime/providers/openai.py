"""OpenAI Chat Completions (or any compatible server via OPENAI_BASE_URL), streamed."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager

import openai
from openai.types.chat import ChatCompletion, ChatCompletionChunk

from sessions_app.runtime.history import project_openai, validate_openai
from sessions_app.runtime.providers.base import (
    ModelReply,
    ProviderError,
    SdkProvider,
    sdk_error_text,
)
from sessions_app.store.base import EntryRecord


class _Reply:
    """Assembles one streamed answer, chunk by chunk (the same for sync and async streams)."""

    def __init__(self, model: str, on_delta: Callable[[str], None]):
        self.reply = ModelReply(model=model)
        self.on_delta = on_delta
        self.text: list[str] = []
        self.calls: dict[int, dict] = {}

    def feed(self, chunk) -> None:
        if chunk.usage is not None:
            self.reply.usage = {
                "input_tokens": chunk.usage.prompt_tokens or 0,
                "output_tokens": chunk.usage.completion_tokens or 0,
            }
        if chunk.model:
            self.reply.model = chunk.model
        for choice in chunk.choices:
            delta = choice.delta
            if delta.content:
                self.text.append(delta.content)
                self.on_delta(delta.content)
            for part in delta.tool_calls or ():
                slot = self.calls.setdefault(part.index, {"id": "", "name": "", "arguments": ""})
                if part.id:
                    slot["id"] = part.id
                if part.function is not None:
                    if part.function.name:
                        slot["name"] = part.function.name
                    slot["arguments"] += part.function.arguments or ""

    def finish(self, *, stopped: bool) -> ModelReply:
        self.reply.stopped = stopped
        self.reply.text = "".join(self.text)
        self.reply.tool_calls = [
            {**slot, "arguments": slot["arguments"] or "{}"}
            for _, slot in sorted(self.calls.items())
            if slot["id"] and slot["name"]
        ]
        return self.reply


@contextmanager
def _sdk_errors() -> Iterator[None]:
    try:
        yield
    except openai.APIStatusError as error:
        raise ProviderError(f"openai {error.status_code}: {sdk_error_text(error)}") from error
    except openai.OpenAIError as error:
        raise ProviderError(f"openai: {error}") from error


class OpenAIProvider(SdkProvider):
    prefix = "openai"

    @property
    def parameters(self) -> dict:
        return {"stream": True, "stream_options": {"include_usage": True}}

    def _make_client(self, **options) -> openai.OpenAI:
        return openai.OpenAI(**options)

    def _make_async_client(self, **options) -> openai.AsyncOpenAI:
        return openai.AsyncOpenAI(**options)

    def _request(self, entries: Sequence[EntryRecord], system_prompt: str, tools) -> dict:
        messages = project_openai(entries, system_prompt)
        validate_openai(messages)
        request: dict = {"model": self.model, "messages": messages, **self.parameters}
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
        # `chat.completions.create` first walks the whole body against the SDK's typed
        # request (every message, every tool schema): a fifth of a loaded worker's event loop.
        # The body here is complete and validated already (project_openai, validate_openai),
        # so it goes through `post`, the SDK's call for a ready body, with what `create`
        # passes besides: the same path, auth, response and stream types.
        stream_class = (
            openai.AsyncStream if isinstance(client, openai.AsyncOpenAI) else openai.Stream
        )
        return client.post(
            "/chat/completions",
            body=request,
            options={"security": {"bearer_auth": True}},
            cast_to=ChatCompletion,
            stream=True,
            stream_cls=stream_class[ChatCompletionChunk],
        )

    def _answer(self, on_delta: Callable[[str], None]) -> _Reply:
        return _Reply(self.model, on_delta)

    def _sdk_errors(self):
        return _sdk_errors()
