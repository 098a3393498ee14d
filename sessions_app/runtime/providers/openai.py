"""OpenAI Chat Completions (or any compatible server via OPENAI_BASE_URL), streamed."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence

import openai

from sessions_app.runtime.history import project_openai, validate_openai
from sessions_app.runtime.providers.base import (
    ModelReply,
    ProviderError,
    SdkProvider,
    ToolSpec,
    sdk_error_text,
)
from sessions_app.store.base import EntryRecord


class OpenAIProvider(SdkProvider):
    prefix = "openai"

    def _make_client(self, **options) -> openai.OpenAI:
        return openai.OpenAI(**options)

    def complete(
        self,
        *,
        entries: Sequence[EntryRecord],
        system_prompt: str,
        tools: Sequence[ToolSpec],
        on_delta: Callable[[str], None],
        abort: threading.Event,
    ) -> ModelReply:
        messages = project_openai(entries, system_prompt)
        validate_openai(messages)
        request: dict = {
            "model": self.model,
            "messages": messages,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
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
        reply = ModelReply(model=self.model)
        text: list[str] = []
        calls: dict[int, dict] = {}
        try:
            with self._connect().chat.completions.create(**request) as stream:
                for chunk in stream:
                    if abort.is_set():
                        reply.stopped = True
                        break  # leaving the block closes the HTTP stream
                    if chunk.usage is not None:
                        reply.usage = {
                            "input_tokens": chunk.usage.prompt_tokens or 0,
                            "output_tokens": chunk.usage.completion_tokens or 0,
                        }
                    if chunk.model:
                        reply.model = chunk.model
                    for choice in chunk.choices:
                        delta = choice.delta
                        if delta.content:
                            text.append(delta.content)
                            on_delta(delta.content)
                        for part in delta.tool_calls or ():
                            slot = calls.setdefault(
                                part.index, {"id": "", "name": "", "arguments": ""}
                            )
                            if part.id:
                                slot["id"] = part.id
                            if part.function is not None:
                                if part.function.name:
                                    slot["name"] = part.function.name
                                slot["arguments"] += part.function.arguments or ""
        except openai.APIStatusError as error:
            raise ProviderError(f"openai {error.status_code}: {sdk_error_text(error)}") from error
        except openai.OpenAIError as error:
            raise ProviderError(f"openai: {error}") from error
        reply.text = "".join(text)
        reply.tool_calls = [
            {**slot, "arguments": slot["arguments"] or "{}"}
            for _, slot in sorted(calls.items())
            if slot["id"] and slot["name"]
        ]
        return reply
