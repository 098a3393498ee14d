"""A conversation's title, written by the model after its first answer (docs/design.md §24).

The first request names the conversation at once with its own first words (turns.py), so
the list never shows a bare id. When a model is configured (TITLE_MODEL, else JARVIS_MODEL;
`offline` for neither), the first answer is followed by
one small question to it — a few words naming the exchange — which replaces that title
unless the person renamed the session meanwhile. The call's usage is the session's own, in
the usage ledger (§22). A failed or empty answer keeps the first words: a title is never
worth failing a turn for.
"""

from __future__ import annotations

import logging

from django.conf import settings

from sessions_app.core.signals import session_retitled
from sessions_app.runtime.providers.oneshot import model_ask, model_calls_counted
from sessions_app.store import get_store
from sessions_app.store.base import EntryRecord
from sessions_app.store.usage_ledger import TITLE, usage_ledger_add

logger = logging.getLogger(__name__)

INSTRUCTIONS = (
    "Name this conversation in at most six words, in the language it is written in. Answer "
    "with the title only: no quotes, no final period."
)
TITLE_WORDS_MAX = 8
EXCHANGE_CHARS = 2000  # of each side: enough to name it, a bounded cost for long prompts
SIGNAL_SENDER = "sessions_app.runtime.turn.titles"


def title_cleaned(answer: str) -> str:
    """The answer's first line, quotes and a trailing period off, at most TITLE_WORDS_MAX
    words."""
    lines = answer.strip().splitlines()
    line = lines[0] if lines else ""
    words = line.strip().strip("\"'“”«»`*#").rstrip(".").split()
    return " ".join(words[:TITLE_WORDS_MAX])


def title_model() -> str | None:
    """The model that writes titles (TITLE_MODEL, else JARVIS_MODEL); None for `offline`."""
    spec = settings.TITLE_MODEL or settings.JARVIS_MODEL
    return None if spec == "offline" else spec


def title_by_model(
    *, session_id: str, incarnation: str, first_words: str, prompt: str, answer: str
) -> str | None:
    """Ask the model for the session's title and keep it; the title kept, or None.

    Steps: nothing without a configured model; ask (no lock held); keep the title only if
    the session, as of `incarnation`, still has the first words as its title; add the
    call's usage to the ledger; tell the person's tabs (`session_retitled`).
    """
    model = title_model()
    if model is None:
        return None
    text = f"User: {prompt[:EXCHANGE_CHARS]}\n\nAssistant: {answer[:EXCHANGE_CHARS]}"
    with model_calls_counted() as calls:
        try:
            title = title_cleaned(model_ask(instructions=INSTRUCTIONS, text=text, model=model))
        except Exception:  # noqa: BLE001 - any model failure keeps the first words
            logger.warning("title for session %s failed", session_id, exc_info=True)
            title = ""
    store = get_store()
    meta = store.get_meta(session_id)
    if meta is None or meta.incarnation != incarnation:
        return None
    for model, usage in calls:
        usage_ledger_add(
            session_id=session_id, source=TITLE, model=model, usage=usage, seq=meta.last_seq
        )
    if not title or meta.title != first_words:
        return None  # no answer, or the person named it meanwhile
    store.set_title(session_id, title, incarnation=incarnation)
    session_retitled.send(sender=SIGNAL_SENDER, session_id=session_id)
    return title


def first_answer(entries: list[EntryRecord]) -> str:
    """The text of the last assistant message among a turn's entries."""
    for entry in reversed(entries):
        if entry.kind == "message" and entry.role == "assistant" and entry.content.strip():
            return entry.content
    return ""
