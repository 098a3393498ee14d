"""One-shot questions to the configured model, for consolidation and compaction.

With JARVIS_MODEL=offline nothing is asked and callers use their deterministic extractors.
With a real model the question goes through the runtime's provider interface, the same one a
turn uses. A failed or unparseable answer is never fatal: memory falls back to the offline
extractor, because losing a consolidation to a flaky model would lose what the user said.
These calls belong to no session, so they do not appear in any session's cost.
"""

from __future__ import annotations

import json
import logging
import re
import threading

from django.conf import settings
from django.utils import timezone

from memory_app.extraction import FactCandidate, normalize_key
from sessions_app.store.base import EntryRecord

logger = logging.getLogger(__name__)

FACTS_INSTRUCTIONS = """\
You extract durable facts a user states about themselves (name, where they live or come
from, likes, preferences, favorites, things they asked to be remembered). You get numbered
user messages. Answer with JSON only:
{"facts": [{"message": <number>, "key": "<short slot, e.g. name, home, favorite:color,
likes:tea>", "text": "<one sentence about 'The user'>", "confidence": <0..1>}]}
Questions and requests are not facts. If there are none, answer {"facts": []}."""

SUMMARY_INSTRUCTIONS = """\
You compress the earlier part of a conversation between a user and the assistant Jarvis so
that Jarvis can continue it without the original messages. Keep names, numbers, decisions,
facts about the user and open questions; drop small talk. Answer with the summary only, as
short bullet points, at most 300 words."""

_JSON_OBJECT = re.compile(r"\{.*\}", re.S)


def model_configured() -> bool:
    return settings.JARVIS_MODEL != "offline"


def model_ask(*, instructions: str, text: str) -> str:
    """The model's answer to one user message under `instructions` (no tools)."""
    from sessions_app.runtime.providers import provider_for

    provider = provider_for()
    question = EntryRecord(
        session_id="memory",
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
    reply = provider.complete(
        entries=[question],
        system_prompt=instructions,
        tools=[],
        on_delta=lambda _piece: None,
        abort=threading.Event(),
    )
    return reply.text


def model_extract_facts(requests: dict[int, str]) -> dict[int, list[FactCandidate]] | None:
    """Facts per episode id as the model reads them; None when offline or the model failed."""
    if not model_configured() or not requests:
        return None
    numbered = list(requests.items())
    text = "\n".join(
        f"{number}. {json.dumps(request, ensure_ascii=False)}"
        for number, (_, request) in enumerate(numbered, start=1)
    )
    try:
        answer = model_ask(instructions=FACTS_INSTRUCTIONS, text=text)
        found = _JSON_OBJECT.search(answer)
        facts = json.loads(found.group(0) if found else answer)["facts"]
        result: dict[int, list[FactCandidate]] = {pk: [] for pk in requests}
        for fact in facts:
            episode_pk = numbered[int(fact["message"]) - 1][0]
            key = ":".join(normalize_key(part) for part in str(fact["key"]).split(":", 1))
            text = str(fact["text"]).strip()
            if not key or not text:
                continue
            confidence = min(1.0, max(0.0, float(fact.get("confidence", 0.7))))
            result[episode_pk].append(FactCandidate(key[:200], text, confidence))
        return result
    except Exception:  # noqa: BLE001 - any model failure falls back to the offline extractor
        logger.warning(
            "fact extraction by %s failed; using the offline extractor",
            settings.JARVIS_MODEL,
            exc_info=True,
        )
        return None


def model_summarize(*, transcript: str, previous: str | None) -> str | None:
    """A summary of the transcript by the model; None when offline or the model failed."""
    if not model_configured():
        return None
    text = transcript if not previous else f"Summary so far:\n{previous}\n\nThen:\n{transcript}"
    try:
        summary = model_ask(instructions=SUMMARY_INSTRUCTIONS, text=text).strip()
    except Exception:  # noqa: BLE001 - any model failure falls back to the extractive summary
        logger.warning(
            "summary by %s failed; using the extractive summary",
            settings.JARVIS_MODEL,
            exc_info=True,
        )
        return None
    return summary or None
