"""What the path a branch leaves behind did, as a `branch_summary` entry (docs/design.md §20).

An edit, a regenerate or a branch at a seq abandons the entries after the cut. The branch
keeps a short account of them — the requests, the tools called with their outcome, the
answers given — so a reader of the branch knows what was tried. The entry is a fact of the
session, never part of what a model receives (history.py projects messages only).

The configured model writes the summary when there is one; offline, or when the model fails,
a plain one is made from the entries themselves, so a branch never fails for want of it.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from django.conf import settings

from sessions_app.runtime.providers.oneshot import (
    calls_usage,
    model_ask,
    model_calls_counted,
    model_configured,
)
from sessions_app.services.compaction import transcript
from sessions_app.store import EntryRecord, NewEntry

logger = logging.getLogger(__name__)

BRANCH_SUMMARY_KIND = "branch_summary"
INSTRUCTIONS = """\
A conversation between a user and the assistant Jarvis was branched: the part below was left
behind and the conversation continues without it. Say in a few short bullet points what that
part did: what the user asked, which tools were called and what they returned, what Jarvis
answered. Answer with the bullet points only, at most 150 words."""
TEXT_CHARS = 200
PLAIN_MAX_LINES = 40


def _trim(text: str, limit: int = TEXT_CHARS) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def plain_summary(abandoned: Sequence[EntryRecord]) -> str:
    """One line per request, tool call (with its outcome) and answer, in the order they
    happened; the first PLAIN_MAX_LINES of them, then how many more there were."""
    outcomes = {
        entry.tool_call_id: entry
        for entry in abandoned
        if entry.kind == "message" and entry.role == "tool"
    }
    lines = []
    for entry in abandoned:
        if entry.kind != "message":
            continue
        if entry.role == "user":
            lines.append(f"- Asked: {_trim(entry.content)}")
        elif entry.role == "assistant":
            for call in entry.tool_calls or ():
                result = outcomes.get(call["id"])
                if result is None:
                    outcome = "no result"
                else:
                    outcome = ("failed: " if result.is_error else "") + _trim(result.content, 80)
                lines.append(f"- Called {call['name']}({_trim(call['arguments'], 80)}) → {outcome}")
            if entry.content.strip():
                lines.append(f"- Answered: {_trim(entry.content)}")
    if len(lines) > PLAIN_MAX_LINES:
        more = len(lines) - PLAIN_MAX_LINES
        lines = [*lines[:PLAIN_MAX_LINES], f"- … and {more} more"]
    return "\n".join(lines) or "- Nothing was said on this path."


def summarize_abandoned(abandoned: Sequence[EntryRecord]) -> str:
    """The model's summary of the abandoned entries, else the plain one."""
    plain = plain_summary(abandoned)
    if not model_configured():
        return plain
    try:
        answer = model_ask(instructions=INSTRUCTIONS, text=transcript(abandoned)).strip()
    except Exception:  # noqa: BLE001 - any model failure falls back to the plain summary
        logger.warning(
            "branch summary by %s failed; using the plain one", settings.JARVIS_MODEL, exc_info=True
        )
        return plain
    return answer or plain


def branch_summary_entry(
    *, source_id: str, at_seq: int, abandoned: Sequence[EntryRecord]
) -> NewEntry:
    """The entry a branch gets after its copied entries, with the usage of the model call
    that wrote it (the branch's own, docs/design.md §22). May ask the model: call it while
    holding no lock."""
    with model_calls_counted() as calls:
        summary = summarize_abandoned(abandoned)
    model, usage = calls_usage(calls)
    return NewEntry(
        kind=BRANCH_SUMMARY_KIND,
        data={"summary": summary, "from_session": source_id, "at_seq": at_seq},
        model=model,
        usage=usage,
    )
