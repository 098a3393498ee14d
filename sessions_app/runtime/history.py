"""Pure functions over a session's entries: pairing repair (DESIGN §5).

No database, no I/O: the store and the turn loop both call these, and property tests can
throw any history at them.
"""

from __future__ import annotations

from collections.abc import Sequence

from sessions_app.store.base import EntryRecord, NewEntry

CRASH_RESULT_TEXT = "outcome unknown: the process stopped while this tool ran"
CRASH_TURN_ERROR = "the process stopped before this turn finished"


def open_turn_id(entries: Sequence[EntryRecord]) -> str | None:
    """The turn id of a trailing turn that has a `turn_start` but no `turn_end`, else None."""
    for entry in reversed(entries):
        if entry.kind == "turn_end":
            return None
        if entry.kind == "turn_start":
            return entry.turn_id
    return None


def unanswered_calls(entries: Sequence[EntryRecord]) -> list[dict]:
    """Tool calls of the last assistant message that have no result after it, in call order."""
    for index in range(len(entries) - 1, -1, -1):
        entry = entries[index]
        if entry.kind == "message" and entry.role == "assistant" and entry.tool_calls:
            answered = {
                later.tool_call_id
                for later in entries[index + 1 :]
                if later.kind == "message" and later.role == "tool"
            }
            return [call for call in entry.tool_calls if call["id"] not in answered]
        if entry.kind in {"turn_end", "turn_start"} or (
            entry.kind == "message" and entry.role in {"user", "assistant"}
        ):
            return []
    return []


def repair_entries(
    entries: Sequence[EntryRecord],
    *,
    result_text: str = CRASH_RESULT_TEXT,
    turn_error: str = CRASH_TURN_ERROR,
) -> list[NewEntry]:
    """Entries that close a trailing unfinished turn; empty when the history is already closed.

    Steps: an error result for every call of the last assistant message still waiting for one
    (in call order, so results stay contiguous), then `turn_end` with status `interrupted`.
    Applying the result and calling again returns nothing: repair is idempotent.
    """
    turn_id = open_turn_id(entries)
    dangling = unanswered_calls(entries)
    if turn_id is None and not dangling:
        return []
    repairs = [
        NewEntry(
            kind="message",
            role="tool",
            tool_call_id=call["id"],
            name=call["name"],
            content=result_text,
            is_error=True,
            turn_id=turn_id or "",
        )
        for call in dangling
    ]
    if turn_id is not None:
        repairs.append(
            NewEntry(
                kind="turn_end",
                turn_id=turn_id,
                data={"status": "interrupted", "error": turn_error},
            )
        )
    return repairs
