"""Anthropic Messages API, streamed."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager

import anthropic

from sessions_app.runtime.context.attachments import seeing_parts
from sessions_app.runtime.context.history import (
    continues_with_thinking,
    project_anthropic,
    validate_anthropic,
)
from sessions_app.runtime.providers.base import (
    ModelReply,
    ProviderError,
    SdkProvider,
    sdk_error_text,
)
from sessions_app.store.base import EntryRecord

MAX_OUTPUT_TOKENS = 4096
# Extended thinking's token budget per level (docs/design.md §20); the answer keeps its own
# MAX_OUTPUT_TOKENS on top, since max_tokens must exceed the budget.
THINKING_BUDGETS = {"low": 1024, "medium": 4096, "high": 16384}


class _Reply:
    """Assembles one streamed answer, event by event (the same for sync and async streams)."""

    def __init__(self, model: str, on_delta: Callable[[str], None]):
        self.reply = ModelReply(model=model)
        self.on_delta = on_delta
        self.text: list[str] = []
        self.blocks: dict[int, dict] = {}
        self.thoughts: dict[int, dict] = {}  # thinking blocks, sent back as they came

    def feed(self, event) -> None:
        if event.type == "message_start":
            self.reply.model = event.message.model or self.reply.model
            usage = event.message.usage
            # Anthropic counts cache reads and writes apart from input_tokens; the usage kept
            # here counts every input token, the cached ones among them (docs/design.md §22).
            cache_read = getattr(usage, "cache_read_input_tokens", None) or 0
            cache_write = getattr(usage, "cache_creation_input_tokens", None) or 0
            self.reply.usage["input_tokens"] = (usage.input_tokens or 0) + cache_read + cache_write
            self.reply.usage["cached_tokens"] = cache_read
        elif event.type == "content_block_start":
            block = event.content_block
            if block.type == "tool_use":
                self.blocks[event.index] = {"id": block.id, "name": block.name, "json": ""}
            elif block.type == "thinking":
                self.thoughts[event.index] = {"type": "thinking", "thinking": "", "signature": ""}
            elif block.type == "redacted_thinking":
                self.thoughts[event.index] = {"type": "redacted_thinking", "data": block.data}
        elif event.type == "content_block_delta":
            delta = event.delta
            if delta.type == "text_delta":
                self.text.append(delta.text)
                self.on_delta(delta.text)
            elif delta.type == "input_json_delta" and event.index in self.blocks:
                self.blocks[event.index]["json"] += delta.partial_json
            elif delta.type == "thinking_delta" and event.index in self.thoughts:
                self.thoughts[event.index]["thinking"] += delta.thinking
            elif delta.type == "signature_delta" and event.index in self.thoughts:
                self.thoughts[event.index]["signature"] += delta.signature
        elif event.type == "message_delta":
            self.reply.usage["output_tokens"] = event.usage.output_tokens or 0
            self.reply.finish_reason = event.delta.stop_reason or ""

    def finish(self, *, stopped: bool) -> ModelReply:
        self.reply.stopped = stopped
        self.reply.text = "".join(self.text)
        self.reply.tool_calls = [
            {"id": block["id"], "name": block["name"], "arguments": _arguments(block["json"])}
            for _, block in sorted(self.blocks.items())
        ]
        # Only whole, signed blocks are kept: a block cut off by an abort has no signature,
        # and sending it back would be refused (a stopped answer keeps no tool use anyway).
        self.reply.reasoning = [
            thought
            for _, thought in sorted(self.thoughts.items())
            if not stopped and (thought["type"] == "redacted_thinking" or thought["signature"])
        ]
        return self.reply


@contextmanager
def _sdk_errors() -> Iterator[None]:
    try:
        yield
    except anthropic.APIStatusError as error:
        text = sdk_error_text(error)
        raise ProviderError(
            f"anthropic {error.status_code}: {text}",
            # Anthropic's refusal of a request longer than the model's window: a 400
            # invalid_request_error whose message says "prompt is too long".
            length_refused=error.status_code == 400 and "prompt is too long" in text.lower(),
        ) from error
    except anthropic.AnthropicError as error:
        raise ProviderError(f"anthropic: {error}") from error


class AnthropicProvider(SdkProvider):
    prefix = "anthropic"

    @property
    def parameters(self) -> dict:
        return {"max_tokens": MAX_OUTPUT_TOKENS, "stream": True}

    def parameters_for(self, thinking: str) -> dict:
        """Thinking is extended thinking with the level's budget (docs/design.md §20)."""
        if thinking not in THINKING_BUDGETS:
            return self.parameters
        budget = THINKING_BUDGETS[thinking]
        return {
            **self.parameters,
            "max_tokens": budget + MAX_OUTPUT_TOKENS,
            "thinking": {"type": "enabled", "budget_tokens": budget},
        }

    def _make_client(self, **options) -> anthropic.Anthropic:
        return anthropic.Anthropic(**options)

    def _make_async_client(self, **options) -> anthropic.AsyncAnthropic:
        # The SDK's aiohttp transport: its C parser reads a streamed answer for about half the
        # CPU of the default one (httpx over anyio), docs/performance.md.
        return anthropic.AsyncAnthropic(**options, http_client=anthropic.DefaultAioHttpClient())

    def _request(
        self, entries: Sequence[EntryRecord], system_prompt: str, tools, parameters: dict
    ) -> dict:
        thinking = (parameters.get("thinking") or {}).get("type") == "enabled"
        system, messages = project_anthropic(
            entries, system_prompt, thinking=thinking, files=seeing_parts
        )
        if thinking and not continues_with_thinking(messages):
            # The request continues a tool use the model made without thinking (thinking
            # was turned on after it): Anthropic refuses thinking there, so this one request
            # goes without it, as its error message advises.
            thinking = False
            parameters = {key: value for key, value in parameters.items() if key != "thinking"} | {
                "max_tokens": MAX_OUTPUT_TOKENS
            }
            system, messages = project_anthropic(entries, system_prompt, files=seeing_parts)
        validate_anthropic(messages, thinking=thinking)
        request: dict = {
            "model": self.model,
            "system": system,
            "messages": messages,
            **parameters,
        }
        if tools:
            request["tools"] = [
                {
                    "name": tool.name,
                    "description": tool.description,
                    "input_schema": tool.parameters,
                }
                for tool in tools
            ]
        return request

    def _open_stream(self, client, request: dict):
        return client.messages.create(**request)

    def _answer(self, on_delta: Callable[[str], None]) -> _Reply:
        return _Reply(self.model, on_delta)

    def _sdk_errors(self):
        return _sdk_errors()


def _arguments(partial_json: str) -> str:
    """The streamed input as a JSON object string (an empty input streams nothing)."""
    if not partial_json.strip():
        return "{}"
    try:
        json.loads(partial_json)
    except ValueError:
        return json.dumps({"arguments": partial_json})
    return partial_json
