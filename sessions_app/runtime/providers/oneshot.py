"""One-shot questions to the configured model, outside any turn: compaction, consolidation.

With JARVIS_MODEL=offline nothing is asked and callers use their deterministic fallbacks.
With a real model the question goes through the provider interface a turn uses. A failed
answer is never fatal to the caller: it falls back, because losing a summary or a
consolidation to a flaky model would lose what the user said. These calls belong to no
session, so they do not appear in any session's cost.
"""

from __future__ import annotations

import threading

from django.conf import settings
from django.utils import timezone

from sessions_app.runtime.providers import provider_for
from sessions_app.store.base import EntryRecord


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


def model_ask(*, instructions: str, text: str) -> str:
    """The configured model's answer to one user message under `instructions` (no tools)."""
    reply = provider_for().complete(
        entries=[question_entry(text)],
        system_prompt=instructions,
        tools=[],
        on_delta=lambda _piece: None,
        abort=threading.Event(),
    )
    return reply.text
