"""When a model call or a tool call started and how long it took (docs/design.md §20).

The facts go into the `data` of the entries the turn stores anyway: the assistant message
gets `model_call {started_at, duration_ms, finish_reason}`, each tool result `tool
{started_at, duration_ms, outcome}`. `data` never reaches a model (history.py reads only
the message fields), so timing a request never changes what the next one sends.
"""

from __future__ import annotations

import time

from django.utils import timezone


class Stopwatch:
    """Started on creation: the wall-clock start (ISO 8601, for people) and a monotonic
    duration (for the length, which a clock change must not bend)."""

    def __init__(self):
        self.started_at = timezone.now().isoformat()
        self._started = time.monotonic()

    def fact(self, **outcome) -> dict:
        return {
            "started_at": self.started_at,
            "duration_ms": round((time.monotonic() - self._started) * 1000),
            **outcome,
        }


def tool_outcome(is_error: bool) -> str:
    return "error" if is_error else "ok"
