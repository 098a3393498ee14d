"""The one small interface every model provider implements."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from sessions_app.store.base import EntryRecord


@dataclass(frozen=True)
class ToolSpec:
    name: str
    description: str
    parameters: dict  # JSON schema of the arguments object


@dataclass
class ModelReply:
    """One model answer: text, tool calls ({id, name, arguments: JSON string}) and usage.

    `stopped` means the user aborted while the answer streamed: `text` is what arrived, and
    tool calls of a cut-off answer are dropped (they may be incomplete).
    """

    text: str = ""
    tool_calls: list[dict] = field(default_factory=list)
    usage: dict = field(default_factory=lambda: {"input_tokens": 0, "output_tokens": 0})
    model: str = ""
    stopped: bool = False


class ProviderError(Exception):
    """The provider refused or failed; the turn ends with status `error` and this text."""


class Provider(Protocol):
    label: str  # what JARVIS_MODEL says: offline, openai:<model>, anthropic:<model>
    model: str  # what assistant entries record and cost is priced by

    def complete(
        self,
        *,
        entries: Sequence[EntryRecord],
        system_prompt: str,
        tools: Sequence[ToolSpec],
        on_delta: Callable[[str], None],
        abort: threading.Event,
    ) -> ModelReply: ...
