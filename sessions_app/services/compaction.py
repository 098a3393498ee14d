"""`/compact`: replace a session's older turns in the model's context by a summary.

The history stays whole — export and the API still show every entry, and cost is what it
was. Only the projection changes: it sends the latest compaction's summary, then the entries
from its `first_kept_seq` (docs/design.md §5, §22; the planning and summary are
runtime.context.compaction's, shared with the turn loop's automatic compaction).
"""

from __future__ import annotations

from django.conf import settings

from sessions_app.runtime.context.compaction import (
    SUMMARY_INSTRUCTIONS,
    compaction_plan,
    compaction_store,
    entry_chars,
    estimate_tokens,
    summarize,
    summary_piece_chars,
    transcript,
)
from sessions_app.runtime.context.context_window import budget_for
from sessions_app.runtime.providers.oneshot import (
    calls_usage,
    model_ask,
    model_calls_counted,
    model_configured,
)
from sessions_app.store import EntryRecord, SessionNotFound, get_store

__all__ = ["compaction_append", "estimate_tokens", "transcript"]


def compaction_append(*, session_id: str) -> EntryRecord:
    """Summarize everything before the last turn and append a `compaction` entry — the work
    behind `sessions.session_compact`, which checks the caller and tells every tab.

    Steps: read the context the model sees now (from the latest compaction on); keep its
    last turn (from that turn's start, so no tool call is cut from its result) and summarize
    the turns before it, carrying the previous summary forward (by the configured model,
    piece by piece so each request fits, or extractively when offline or the model fails);
    append `NewEntry(kind="compaction", data={summary, first_kept_seq, reason: "manual",
    tokens_before, tokens_after})` and send `session_compacted` (memory keeps the summary as
    the session's long-term memory), in one transaction on the db backend. Raises
    ValueError("nothing to compact") when fewer than two turns are in the context,
    SessionNotFound for an unknown session.
    """
    store = get_store()
    if store.get_meta(session_id) is None:
        raise SessionNotFound(session_id)
    entries = store.get_context_entries(session_id)
    plan = compaction_plan(entries, keep_tokens=0, count=entry_chars)
    if plan is None:
        raise ValueError("nothing to compact")
    # Asked before anything is written: a model call may take seconds and holds no lock.
    with model_calls_counted() as calls:
        summary = summarize(
            plan,
            ask=_ask if model_configured() else None,
            piece_chars=summary_piece_chars(budget_for(settings.JARVIS_MODEL)),
        )
    # The summary's own model calls are the session's usage (docs/design.md §22).
    model, usage = calls_usage(calls)
    return compaction_store(
        session_id=session_id,
        plan=plan,
        summary=summary,
        reason="manual",
        tokens_before=estimate_tokens([*plan.summarized, *plan.kept], plan.previous_summary),
        tokens_after=estimate_tokens(plan.kept, summary),
        model=model,
        usage=usage,
    )


def _ask(text: str) -> str:
    return model_ask(instructions=SUMMARY_INSTRUCTIONS, text=text)
