"""Compaction: a summary in place of older turns in what a model sees (docs/design.md §22).

The history stays whole — export and the API still show every entry, and cost is what it
was. Only the projection changes: it sends the latest compaction's summary, then the entries
from its `first_kept_seq` (history.py). Used by `/compact` (services.compaction, reason
`manual`) and by the turn loop when a request would not fit (runtime.turn.context_fit, reasons
`auto` and `overflow`).

A cut is only ever made where a turn starts (its `turn_start`, or the user message of a
turn stored without one), so the kept tail never begins between a tool call and its result.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from django.db import transaction

from sessions_app.core.signals import session_compacted
from sessions_app.runtime.context.context_window import ContextBudget
from sessions_app.store import EntryRecord, NewEntry, get_store

logger = logging.getLogger(__name__)

REQUEST_CHARS = 200
ANSWER_CHARS = 300
SUMMARY_MAX_CHARS = 6000
# The usual rule of thumb for English text and JSON: about four characters per token.
CHARS_PER_TOKEN = 4
# A transcript longer than this many pieces is not sent to the model piece by piece (each
# piece is a call, and the turn waits): the extractive summary does it at once.
SUMMARY_MAX_PIECES = 8

SUMMARY_INSTRUCTIONS = """\
You compress the earlier part of a conversation between a user and the assistant Jarvis so
that Jarvis can continue it without the original messages. Keep names, numbers, decisions,
facts about the user and open questions; drop small talk. Answer with the summary only, as
short bullet points, at most 300 words."""
SUMMARY_SO_FAR = "Summary so far:\n{previous}\n\nThen:\n{piece}"


def estimate_tokens(entries: Sequence[EntryRecord], summary: str | None = None) -> int:
    """Roughly how many tokens these entries (and a summary) take in a model's context."""
    chars = len(summary or "")
    for entry in entries:
        chars += entry_chars(entry)
    return -(-chars // CHARS_PER_TOKEN)


def entry_chars(entry: EntryRecord) -> int:
    """Characters of what a model is sent of one entry (0 for what it is not sent)."""
    if entry.kind != "message":
        return 0
    chars = len(entry.content)
    for call in entry.tool_calls or ():
        chars += len(call["name"]) + len(call["arguments"])
    return chars


def latest_compaction(entries: Sequence[EntryRecord]) -> EntryRecord | None:
    return next((entry for entry in reversed(entries) if entry.kind == "compaction"), None)


def context_start(entries: Sequence[EntryRecord]) -> tuple[str | None, int]:
    """(the latest compaction's summary, its `first_kept_seq`); (None, 0) without one."""
    previous = latest_compaction(entries)
    if previous is None:
        return None, 0
    data = previous.data or {}
    return data.get("summary") or None, int(data.get("first_kept_seq") or 0)


def cut_points(entries: Sequence[EntryRecord], from_seq: int) -> list[int]:
    """Seqs where a turn begins: its `turn_start`, or the user message when it has none.

    A steer (a user message inside a running turn) is no cut point: the turn around it
    stays whole. Only these cuts can be chosen, so the kept tail never begins between a
    tool call and its result.
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
        elif not (entry.data or {}).get("steer"):
            starts.append(entry.seq)
    return starts


@dataclass(frozen=True)
class CompactionPlan:
    previous_summary: str | None
    summarized: list[EntryRecord]  # what the summary replaces
    kept: list[EntryRecord]  # what stays verbatim, from first_kept_seq on
    first_kept_seq: int


def compaction_plan(
    entries: Sequence[EntryRecord], *, keep_tokens: int, count: Callable[[EntryRecord], int]
) -> CompactionPlan | None:
    """Where to cut the context: the earliest turn start whose tail (from it to the end)
    counts at most `keep_tokens`, else the latest turn start; None when no cut leaves
    anything to summarize (one turn, or none, in the context).

    `entries` must hold the context (from the latest compaction's `first_kept_seq` on);
    `count` says what one entry takes in the model's context.
    """
    previous_summary, context_from = context_start(entries)
    in_context = [entry for entry in entries if entry.seq >= context_from]
    messages = [entry.seq for entry in in_context if entry.kind == "message"]
    if not messages:
        return None
    candidates = [seq for seq in cut_points(in_context, context_from) if seq > messages[0]]
    if not candidates:
        return None
    tail = 0
    cut = candidates[-1]
    position = len(in_context)
    for candidate in reversed(candidates):
        while position and in_context[position - 1].seq >= candidate:
            position -= 1
            tail += count(in_context[position])
        if tail > keep_tokens:
            break
        cut = candidate
    return CompactionPlan(
        previous_summary=previous_summary,
        summarized=[entry for entry in in_context if entry.seq < cut],
        kept=[entry for entry in in_context if entry.seq >= cut],
        first_kept_seq=cut,
    )


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


def summary_pieces(text: str, piece_chars: int) -> list[str]:
    """The transcript cut into pieces of at most `piece_chars` characters, at line ends
    where it can be (a line longer than a piece is cut inside)."""
    pieces: list[str] = []
    current: list[str] = []
    size = 0
    for line in text.splitlines():
        while len(line) > piece_chars:
            pieces.extend(["\n".join(current)] if current else [])
            current, size = [], 0
            pieces.append(line[:piece_chars])
            line = line[piece_chars:]
        if size + len(line) + 1 > piece_chars and current:
            pieces.append("\n".join(current))
            current, size = [], 0
        current.append(line)
        size += len(line) + 1
    if current and any(line.strip() for line in current):
        pieces.append("\n".join(current))
    return [piece for piece in pieces if piece.strip()]


def summary_question(previous: str | None, piece: str) -> str:
    """What one summary call asks: the running summary (its newest SUMMARY_MAX_CHARS at
    most, so a long-winded model cannot grow the next request) and the next piece."""
    if not previous:
        return piece
    return SUMMARY_SO_FAR.format(previous=previous[-SUMMARY_MAX_CHARS:], piece=piece)


def summary_request_chars(piece_chars: int) -> int:
    """The most characters one summary call sends (its instructions aside)."""
    return len(SUMMARY_SO_FAR) + SUMMARY_MAX_CHARS + piece_chars


def summary_piece_chars(budget: ContextBudget) -> int:
    """The transcript's share of one summary request to a model with this budget: the room
    left by the instructions and the running summary, at two characters a token (few texts
    take more tokens than that)."""
    overhead = (len(SUMMARY_INSTRUCTIONS) + summary_request_chars(0)) // 2
    return max(2000, (budget.available - overhead) * 2)


def summarize(plan: CompactionPlan, *, ask: Callable[[str], str] | None, piece_chars: int) -> str:
    """The summary of `plan.summarized` (carrying the previous summary forward): by the
    model through `ask` (one call per piece of the transcript), else — offline, a model
    that failed, a transcript of too many pieces — extractively."""
    pieces = summary_pieces(transcript(plan.summarized), piece_chars)
    if ask is not None and 0 < len(pieces) <= SUMMARY_MAX_PIECES:
        running = plan.previous_summary
        try:
            for piece in pieces:
                running = ask(summary_question(running, piece)).strip() or running
        except Exception:  # noqa: BLE001 - any model failure falls back to the extractive one
            logger.warning("summary by the model failed; using the extractive one", exc_info=True)
        else:
            if running and running != plan.previous_summary:
                return running[-SUMMARY_MAX_CHARS:]
    return extractive_summary(plan.summarized, plan.previous_summary)


async def summarize_async(
    plan: CompactionPlan, *, ask: Callable[[str], Awaitable[str]] | None, piece_chars: int
) -> str:
    """`summarize` for the event loop: the model is asked without holding a thread."""
    pieces = summary_pieces(transcript(plan.summarized), piece_chars)
    if ask is not None and 0 < len(pieces) <= SUMMARY_MAX_PIECES:
        running = plan.previous_summary
        try:
            for piece in pieces:
                running = (await ask(summary_question(running, piece))).strip() or running
        except Exception:  # noqa: BLE001 - any model failure falls back to the extractive one
            logger.warning("summary by the model failed; using the extractive one", exc_info=True)
        else:
            if running and running != plan.previous_summary:
                return running[-SUMMARY_MAX_CHARS:]
    return extractive_summary(plan.summarized, plan.previous_summary)


def compaction_store(
    *,
    session_id: str,
    plan: CompactionPlan,
    summary: str,
    reason: str,
    tokens_before: int,
    tokens_after: int,
    turn_id: str = "",
    incarnation: str | None = None,
    model: str = "",
    usage: dict | None = None,
) -> EntryRecord:
    """Append the `compaction` entry and send `session_compacted` (memory keeps the summary
    as the session's long-term memory), in one transaction on the db backend. `model` and
    `usage` are what the summary's calls spent (none for an extractive summary)."""
    data = {
        "summary": summary,
        "first_kept_seq": plan.first_kept_seq,
        "reason": reason,
        "tokens_before": tokens_before,
        "tokens_after": tokens_after,
    }
    with transaction.atomic():
        # On the db backend the entry and what the receivers store commit together (they run
        # here, synchronously, and a failing one rolls the entry back); the jsonl backend has
        # written its line durably by the time they run.
        [record] = get_store().append(
            session_id,
            [NewEntry(kind="compaction", data=data, turn_id=turn_id, model=model, usage=usage)],
            incarnation=incarnation,
        )
        session_compacted.send(
            sender=__name__,
            session_id=session_id,
            entry_seq=record.seq,
            summary=summary,
            first_kept_seq=plan.first_kept_seq,
            tokens_before=tokens_before,
        )
    return record
