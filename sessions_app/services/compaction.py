"""`/compact`: replace a session's older turns in the model's context by a summary.

The history stays whole — export and the API still show every entry, and cost is what it
was. Only the projection changes: it sends the latest compaction's summary, then the entries
from its `first_kept_seq` (docs/design.md §5).
"""

from __future__ import annotations

from collections.abc import Sequence

from django.db import transaction

from sessions_app.runtime.providers.oneshot import calls_usage, model_calls_counted, model_summarize
from sessions_app.signals import session_compacted
from sessions_app.store import EntryRecord, NewEntry, SessionNotFound, get_store

REQUEST_CHARS = 200
ANSWER_CHARS = 300
SUMMARY_MAX_CHARS = 6000
# The usual rule of thumb for English text and JSON: about four characters per token.
CHARS_PER_TOKEN = 4


def estimate_tokens(entries: Sequence[EntryRecord], summary: str | None = None) -> int:
    """Roughly how many tokens these entries (and a summary) take in a model's context."""
    chars = len(summary or "")
    for entry in entries:
        if entry.kind != "message":
            continue
        chars += len(entry.content)
        for call in entry.tool_calls or ():
            chars += len(call["name"]) + len(call["arguments"])
    return -(-chars // CHARS_PER_TOKEN)


def _latest_compaction(entries: Sequence[EntryRecord]) -> EntryRecord | None:
    return next((entry for entry in reversed(entries) if entry.kind == "compaction"), None)


def _turn_starts(entries: Sequence[EntryRecord], from_seq: int) -> list[int]:
    """Seqs where a turn begins: its `turn_start`, or the user message when it has none.

    Only cuts at a user message can be chosen, so the kept tail never begins between a tool
    call and its result.
    """
    starts = []
    for index, entry in enumerate(entries):
        if entry.seq < from_seq or entry.kind != "message" or entry.role != "user":
            continue
        before = entries[index - 1] if index else None
        if (
            before is not None
            and before.kind == "turn_start"
            and before.turn_id == entry.turn_id
            and before.seq >= from_seq
        ):
            starts.append(before.seq)
        else:
            starts.append(entry.seq)
    return starts


def _trim(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def extractive_summary(entries: Sequence[EntryRecord], previous: str | None) -> str:
    """The earlier conversation as one line per exchange: the request, tools used, the answer.

    Works without a model. The previous compaction's summary is carried forward; when the
    whole grows past SUMMARY_MAX_CHARS the oldest lines give way.
    """
    lines: list[str] = []
    request, tools, answer = None, [], ""

    def flush():
        if request is None:
            return
        line = f"- User: {_trim(request, REQUEST_CHARS)}"
        if tools:
            line += f" [tools: {', '.join(dict.fromkeys(tools))}]"
        line += f" → Jarvis: {_trim(answer, ANSWER_CHARS)}" if answer else ""
        lines.append(line)

    for entry in entries:
        if entry.kind != "message":
            continue
        if entry.role == "user":
            flush()
            request, tools, answer = entry.content, [], ""
        elif entry.role == "assistant":
            tools.extend(call["name"] for call in entry.tool_calls or ())
            if entry.content.strip():
                answer = entry.content
    flush()
    if previous:
        lines = [line for line in previous.splitlines() if line.strip()] + lines
    while len(lines) > 1 and sum(len(line) + 1 for line in lines) > SUMMARY_MAX_CHARS:
        lines.pop(0)
    return "\n".join(lines)


def transcript(entries: Sequence[EntryRecord]) -> str:
    """The messages as a model reads a conversation: who said what, tools and their results."""
    lines = []
    for entry in entries:
        if entry.kind != "message":
            continue
        if entry.role == "user":
            lines.append(f"User: {entry.content}")
        elif entry.role == "assistant":
            if entry.content.strip():
                lines.append(f"Jarvis: {entry.content}")
            for call in entry.tool_calls or ():
                lines.append(f"Jarvis calls {call['name']}({call['arguments']})")
        elif entry.role == "tool":
            lines.append(f"{entry.name} returned: {_trim(entry.content, ANSWER_CHARS)}")
    return "\n".join(lines)


def session_compact(*, session_id: str) -> EntryRecord:
    """Summarize everything before the last turn and append a `compaction` entry.

    Steps: read the history; take the context the model sees now (after the latest
    compaction); keep its last turn (from that turn's start, so no tool call is cut from its
    result) and summarize the turns before it, carrying the previous summary forward (by the
    configured model, or extractively when offline or the model fails); append
    `NewEntry(kind="compaction", data={summary, first_kept_seq, tokens_before})` and send
    `session_compacted` (memory keeps the summary as the session's long-term memory), in one
    transaction on the db backend. Raises ValueError("nothing to compact") when fewer than
    two turns are in the context, SessionNotFound for an unknown session.
    """
    store = get_store()
    if store.get_meta(session_id) is None:
        raise SessionNotFound(session_id)
    entries = store.get_messages(session_id)
    previous = _latest_compaction(entries)
    previous_summary = (previous.data or {}).get("summary") if previous else None
    context_from = int((previous.data or {}).get("first_kept_seq") or 0) if previous else 0
    starts = _turn_starts(entries, context_from)
    if len(starts) < 2:
        raise ValueError("nothing to compact")
    first_kept_seq = starts[-1]
    in_context = [entry for entry in entries if entry.seq >= context_from]
    summarized = [entry for entry in in_context if entry.seq < first_kept_seq]
    tokens_before = estimate_tokens(in_context, previous_summary)
    # Asked before anything is written: a model call may take seconds and holds no lock.
    with model_calls_counted() as calls:
        summary = model_summarize(
            transcript=transcript(summarized), previous=previous_summary
        ) or extractive_summary(summarized, previous_summary)
    # The summary's own model calls are the session's usage (docs/design.md §22).
    model, usage = calls_usage(calls)

    data = {"summary": summary, "first_kept_seq": first_kept_seq, "tokens_before": tokens_before}
    with transaction.atomic():
        # On the db backend the entry and what the receivers store commit together (they run
        # here, synchronously, and a failing one rolls the entry back); the jsonl backend has
        # written its line durably by the time they run.
        [record] = store.append(
            session_id, [NewEntry(kind="compaction", data=data, model=model, usage=usage)]
        )
        session_compacted.send(sender=__name__, session_id=session_id, entry_seq=record.seq, **data)
    return record
