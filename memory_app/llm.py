"""Consolidation's question to the configured model: which facts did the user state?

The question goes through the runtime's one-shot helper (sessions_app.runtime.providers.
oneshot). With JARVIS_MODEL=offline nothing is asked; a failed or unparseable answer is never
fatal: consolidation falls back to the offline extractor, because losing a consolidation to a
flaky model would lose what the user said.
"""

from __future__ import annotations

import json
import logging

from django.conf import settings

from memory_app.extraction import FactCandidate, normalize_key
from sessions_app.services.extensions import model_ask, model_configured

logger = logging.getLogger(__name__)

FACTS_INSTRUCTIONS = """\
You extract durable facts a user states about themselves (name, where they live or come
from, likes, preferences, favorites, things they asked to be remembered). You get numbered
user messages. Answer with JSON only:
{"facts": [{"message": <number>, "key": "<short slot, e.g. name, home, favorite:color,
likes:tea>", "text": "<one sentence about 'The user'>", "confidence": <0..1>}]}
Questions and requests are not facts. If there are none, answer {"facts": []}."""


def json_object_text(answer: str) -> str:
    """The answer from its first `{` to its last `}` (a model may wrap its JSON in prose or a
    code fence), else the whole answer. Found with two scans: the regular expression `{.*}`
    did the same but tried each `{` against the rest of the answer, the square of its length."""
    start, end = answer.find("{"), answer.rfind("}")
    return answer[start : end + 1] if 0 <= start < end else answer


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
        facts = json.loads(json_object_text(answer))["facts"]
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
