"""Anthropic Messages API, streamed."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Sequence

import anthropic

from sessions_app.runtime.history import project_anthropic, validate_anthropic
from sessions_app.runtime.providers.base import (
    ModelReply,
    ProviderError,
    SdkProvider,
    ToolSpec,
    sdk_error_text,
)
from sessions_app.store.base import EntryRecord

MAX_OUTPUT_TOKENS = 4096


class AnthropicProvider(SdkProvider):
    prefix = "anthropic"

    def _make_client(self, **options) -> anthropic.Anthropic:
        return anthropic.Anthropic(**options)

    def complete(
        self,
        *,
        entries: Sequence[EntryRecord],
        system_prompt: str,
        tools: Sequence[ToolSpec],
        on_delta: Callable[[str], None],
        abort: threading.Event,
    ) -> ModelReply:
        system, messages = project_anthropic(entries, system_prompt)
        validate_anthropic(messages)
        request: dict = {
            "model": self.model,
            "max_tokens": MAX_OUTPUT_TOKENS,
            "system": system,
            "messages": messages,
            "stream": True,
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
        reply = ModelReply(model=self.model)
        text: list[str] = []
        blocks: dict[int, dict] = {}
        try:
            with self._connect().messages.create(**request) as stream:
                for event in stream:
                    if abort.is_set():
                        reply.stopped = True
                        break  # leaving the block closes the HTTP stream
                    if event.type == "message_start":
                        reply.model = event.message.model or self.model
                        reply.usage["input_tokens"] = event.message.usage.input_tokens or 0
                    elif event.type == "content_block_start":
                        block = event.content_block
                        if block.type == "tool_use":
                            blocks[event.index] = {"id": block.id, "name": block.name, "json": ""}
                    elif event.type == "content_block_delta":
                        delta = event.delta
                        if delta.type == "text_delta":
                            text.append(delta.text)
                            on_delta(delta.text)
                        elif delta.type == "input_json_delta" and event.index in blocks:
                            blocks[event.index]["json"] += delta.partial_json
                    elif event.type == "message_delta":
                        reply.usage["output_tokens"] = event.usage.output_tokens or 0
        except anthropic.APIStatusError as error:
            raise ProviderError(
                f"anthropic {error.status_code}: {sdk_error_text(error)}"
            ) from error
        except anthropic.AnthropicError as error:
            raise ProviderError(f"anthropic: {error}") from error
        reply.text = "".join(text)
        reply.tool_calls = [
            {"id": block["id"], "name": block["name"], "arguments": _arguments(block["json"])}
            for _, block in sorted(blocks.items())
        ]
        return reply


def _arguments(partial_json: str) -> str:
    """The streamed input as a JSON object string (an empty input streams nothing)."""
    if not partial_json.strip():
        return "{}"
    try:
        json.loads(partial_json)
    except ValueError:
        return json.dumps({"arguments": partial_json})
    return partial_json
