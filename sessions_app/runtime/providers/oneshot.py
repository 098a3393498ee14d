"""One-shot questions to the configured model, outside any turn: compaction, consolidation.

With JARVIS_MODEL=offline nothing is asked and callers use their deterministic fallbacks.
With a real model the question goes through the provider interface a turn uses. A failed
answer is never fatal to the caller: it falls back, because losing a summary or a
consolidation to a flaky model would lose what the user said.

A caller that keeps what the calls used (docs/design.md §22: a summary on its entry,
consolidation in the usage ledger) asks inside `model_calls_counted()`, which collects each
answered call's model and usage without changing what the helpers return.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from django.conf import settings
from django.utils import timezone

from sessions_app.runtime.providers import provider_for
from sessions_app.store.base import EntryRecord

# (model, usage) of each call answered inside the innermost `model_calls_counted` block.
_counted: ContextVar[list[tuple[str, dict]] | None] = ContextVar("oneshot_counted", default=None)


@contextmanager
def model_calls_counted() -> Iterator[list[tuple[str, dict]]]:
    """Collect the (model, usage) of every one-shot call answered inside the block."""
    calls: list[tuple[str, dict]] = []
    token = _counted.set(calls)
    try:
        yield calls
    finally:
        _counted.reset(token)


def calls_usage(calls: list[tuple[str, dict]]) -> tuple[str, dict | None]:
    """One (model, usage) for an entry that several calls made (a summary in pieces): the
    counts summed, the model of the last call; ("", None) when no call was answered."""
    if not calls:
        return "", None
    total: dict[str, int] = {}
    for _, usage in calls:
        for count, value in usage.items():
            if isinstance(value, int):
                total[count] = total.get(count, 0) + value
    return calls[-1][0], total


def model_configured() -> bool:
    return settings.JARVIS_MODEL != "offline"


def question_entry(text: str) -> EntryRecord:
    """One user message that belongs to no session, for a question asked outside a turn."""
    return EntryRecord(
        # The question belongs to no session; providers never read this field.
        session_id="",
        seq=1,
        kind="message",
        role="user",
        content=text,
        tool_calls=None,
        tool_call_id="",
        name="",
        is_error=False,
        model="",
        usage=None,
        turn_id="",
        data=None,
        created_at=timezone.now(),
    )


def model_ask(*, instructions: str, text: str, model: str | None = None) -> str:
    """The configured model's (or `model`'s) answer to one user message under `instructions`
    (no tools)."""
    provider = provider_for(model)
    reply = provider.complete(
        entries=[question_entry(text)],
        system_prompt=instructions,
        tools=[],
        on_delta=lambda _piece: None,
        abort=threading.Event(),
    )
    counted = _counted.get()
    if counted is not None:
        counted.append((reply.model or provider.model, dict(reply.usage)))
    return reply.text
