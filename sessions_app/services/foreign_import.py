"""Bring your history (docs/design.md §21): a ChatGPT export or an openai-agents database
imported as sessions of the importing user.

Each conversation's shown path becomes a session; each other path of a ChatGPT tree a branch
of it (`parent_id` the session, `branched_at_seq` the last entry both share: the branch is
that session's copy up to there, then its own entries). Histories are repaired the way
`import_sessions` repairs the seed's files and must pass both providers' validators; a
conversation that cannot is reported and left out, the others go in. Idempotent by source
id: every session made is recorded in `ImportedSession` (the conversation's id, or
`<conversation id>:<leaf node id>` for a branch, with the conversation's creation time), and
importing the same file again finds those records and adds nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from django.contrib.auth import get_user_model
from django.db import DatabaseError, transaction
from django.utils import timezone

from sessions_app.core.ids import new_session_id
from sessions_app.formats import (
    ForeignConversation,
    ForeignFile,
    ForeignFormatInvalid,
    ImportLimits,
    ImportTooLarge,
    chatgpt_read,
    openai_agents_read,
    stored_id,
)
from sessions_app.models import ImportedSession
from sessions_app.runtime.context.history import HistoryInvalid
from sessions_app.services.transfer import check_history, repair_history
from sessions_app.store import NewEntry, SessionNotFound, get_store

SOURCES = ("chatgpt", "openai-agents")

__all__ = [
    "SOURCES",
    "ForeignFormatInvalid",
    "ForeignImportReport",
    "ImportTooLarge",
    "history_import",
]

logger = logging.getLogger(__name__)


@dataclass
class ForeignOutcome:
    source_id: str
    session_id: str | None  # None: not made (a dry run, or refused)
    imported: bool  # False: imported before (or refused: see error)
    entries: int
    parent_id: str | None = None
    branched_at_seq: int | None = None
    notes: list[str] = field(default_factory=list)
    error: str = ""

    def to_api(self) -> dict[str, Any]:
        return {
            "source_id": self.source_id,
            "session_id": self.session_id,
            "imported": self.imported,
            "entries": self.entries,
            "parent_id": self.parent_id,
            "branched_at_seq": self.branched_at_seq,
            "notes": self.notes,
            "error": self.error or None,
        }


@dataclass
class ForeignImportReport:
    source: str
    dry_run: bool
    outcomes: list[ForeignOutcome] = field(default_factory=list)

    def count(self, *, imported: bool, failed: bool = False) -> int:
        return sum(
            1
            for outcome in self.outcomes
            if outcome.imported == imported and bool(outcome.error) == failed
        )

    def lines(self) -> list[str]:
        verb = "would import" if self.dry_run else "imported"
        lines = []
        for outcome in self.outcomes:
            target = outcome.session_id or "a new id"
            if outcome.error:
                lines.append(f"not imported {outcome.source_id}: {outcome.error}")
                continue
            if not outcome.imported:
                lines.append(f"unchanged {outcome.source_id}: imported before as {target}")
                continue
            line = f"{verb} {outcome.source_id} as {target} ({outcome.entries} entries)"
            if outcome.branched_at_seq is not None:
                parent = outcome.parent_id or "its conversation"
                line += f", a branch of {parent} at seq {outcome.branched_at_seq}"
            lines.append("; ".join([line, *outcome.notes]))
        lines.append(
            f"{self.count(imported=True)} of {len(self.outcomes)} session(s) "
            f"{'would be imported' if self.dry_run else 'imported'}"
        )
        return lines

    def to_api(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "dry_run": self.dry_run,
            "imported": self.count(imported=True),
            "unchanged": self.count(imported=False),
            "failed": self.count(imported=False, failed=True),
            "sessions": [outcome.to_api() for outcome in self.outcomes],
        }


def _checked(entries: Sequence[NewEntry]) -> tuple[list[NewEntry], list[str]]:
    """The entries repaired (§5 pairing) and what was done; HistoryInvalid when even the
    repaired history is one a provider would refuse."""
    repair = repair_history(entries)
    check_history(repair.entries)
    return repair.entries, repair.notes()


def _common_prefix(first: Sequence[NewEntry], second: Sequence[NewEntry]) -> int:
    shared = 0
    for one, other in zip(first, second, strict=False):
        if one != other:
            break
        shared += 1
    return shared


@dataclass
class _Planned:
    """A session an import makes (or found made before): its entries repaired and checked,
    and for a branch the planned session that holds the prefix it shares, and where."""

    outcome: ForeignOutcome
    entries: list[NewEntry]
    holder: int | None = None  # index in the conversation's plan; None: the main session
    at_seq: int = 0


def _refused(source_id: str, entries: int, error: str) -> ForeignOutcome:
    return ForeignOutcome(
        source_id=source_id, session_id=None, imported=False, entries=entries, error=error
    )


def _plan(conversation: ForeignConversation, budget: list[int]) -> list[_Planned]:
    """What to make of one conversation, all checked before anything is written: its main
    session, then each branch as a branch of the nearest planned path it leaves (a branch
    that adds nothing to it is skipped; branches that do not fit `budget[0]`, the entries
    the file's branches may still write, are left out and counted)."""
    if conversation.error:
        return [_planned_error(conversation.source_id, len(conversation.main), conversation.error)]
    try:
        main, repairs = _checked(conversation.main)
    except HistoryInvalid as error:
        plan = [_planned_error(conversation.source_id, len(conversation.main), _invalid(error))]
        plan.extend(
            _planned_error(
                branch.source_id, len(branch.entries), "its conversation was not imported"
            )
            for branch in conversation.branches
        )
        return plan
    notes = [*conversation.notes, *repairs]
    plan = [
        _Planned(
            ForeignOutcome(
                source_id=conversation.source_id,
                session_id=None,
                imported=True,
                entries=len(main),
                notes=notes,
            ),
            main,
        )
    ]
    # holders[i]: the plan index of the session holding branch i's path (itself, or, for a
    # branch skipped or refused, the one holding its parent's).
    holders: list[int] = []
    left_out, left_out_why = conversation.left_out, conversation.left_out_why
    for position, branch in enumerate(conversation.branches):
        holder = 0 if branch.parent < 0 else holders[branch.parent]
        holders.append(holder)
        try:
            entries, repairs = _checked(branch.entries)
        except HistoryInvalid as error:
            plan.append(_planned_error(branch.source_id, len(branch.entries), _invalid(error)))
            continue
        at_seq = _common_prefix(plan[holder].entries, entries)
        if at_seq == len(entries):
            continue  # a path that adds nothing to the one it leaves (a hidden leaf)
        if len(entries) > budget[0]:
            # Repairs made the branches longer than the reader counted: this one and the
            # rest stay out (a later branch may hang from this one).
            left_out += len(conversation.branches) - position
            left_out_why = "over the file's budget of entries (IMPORT_MAX_ENTRIES)"
            budget[0] = 0
            break
        budget[0] -= len(entries)
        holders[-1] = len(plan)
        plan.append(
            _Planned(
                ForeignOutcome(
                    source_id=branch.source_id,
                    session_id=None,
                    imported=True,
                    entries=len(entries),
                    branched_at_seq=at_seq,
                    notes=[*branch.notes, *repairs],
                ),
                entries,
                holder=holder,
                at_seq=at_seq,
            )
        )
    if left_out:
        notes.append(f"{left_out} branch(es) left out: {left_out_why}")
    return plan


def _planned_error(source_id: str, entries: int, error: str) -> _Planned:
    return _Planned(_refused(source_id, entries, error), [])


def _invalid(error: HistoryInvalid) -> str:
    return f"not a history a model accepts, even repaired: {error}"


def _imported_before(owner_id: int, source_id: str, created_at: datetime) -> str | None:
    """The session an earlier import made of this source, if it is still the owner's."""
    session_id = (
        ImportedSession.objects.filter(
            owner_id=owner_id, source_id=stored_id(source_id), source_created_at=created_at
        )
        .values_list("session_id", flat=True)
        .first()
    )
    if session_id is None:
        return None
    meta = get_store().get_meta(session_id)
    return session_id if meta is not None and meta.owner_id == owner_id else None


def _record(owner_id: int, source_id: str, created_at: datetime, session_id: str) -> None:
    ImportedSession.objects.update_or_create(
        owner_id=owner_id,
        source_id=stored_id(source_id),
        source_created_at=created_at,
        defaults={"session_id": session_id, "imported_at": timezone.now()},
    )


def _write(
    *, owner_id: int, conversation: ForeignConversation, plan: list[_Planned], dry_run: bool
) -> None:
    """Make the planned sessions, main first, each branch from the session holding its
    prefix; a session an earlier import made is found, not made again. The caller holds the
    transaction."""
    store = get_store()
    for planned in plan:
        outcome = planned.outcome
        if outcome.error:
            continue
        if planned.holder is not None:
            outcome.parent_id = plan[planned.holder].outcome.session_id
        earlier = _imported_before(owner_id, outcome.source_id, conversation.created_at)
        if earlier is not None:
            outcome.session_id, outcome.imported = earlier, False
            continue
        if dry_run:
            continue
        if planned.holder is None:
            meta = store.create(new_session_id(), owner_id=owner_id, title=conversation.title)
            new_entries = planned.entries
        else:
            meta = store.create_branch(outcome.parent_id, at_seq=planned.at_seq, owner_id=owner_id)
            new_entries = planned.entries[planned.at_seq :]
        if new_entries:
            store.append(meta.id, new_entries, incarnation=meta.incarnation)
        _record(owner_id, outcome.source_id, conversation.created_at, meta.id)
        outcome.session_id = meta.id


def _read(source: str, path: Path, limits: ImportLimits) -> ForeignFile:
    if source == "chatgpt":
        if path.stat().st_size > limits.unpacked_bytes:  # before reading it into memory
            raise ImportTooLarge(
                f"the file is larger than IMPORT_MAX_UNPACKED_BYTES ({limits.unpacked_bytes} bytes)"
            )
        return chatgpt_read(path.read_bytes(), limits)
    if source == "openai-agents":
        return openai_agents_read(path, limits)
    raise ValueError(f"the source is one of {', '.join(SOURCES)}, not {source!r}")


def history_import(
    *, owner_id: int, source: str, path: Path, dry_run: bool = False
) -> ForeignImportReport:
    """Import every conversation of the file for the owner; returns the report.

    Steps: read the whole file and plan every session — repaired, checked, within the
    file's budget — before anything is written (ForeignFormatInvalid when it is not a
    `source` file or more than the budget takes: nothing imported). Then each conversation
    in a transaction of its own holding the owner's row (two imports for one user take
    turns, so both never find a conversation missing and make it twice): its session, then
    its branches. No lock is held while reading or planning. A conversation the database
    refuses is rolled back and reported; the others go in. A dry run stops before the first
    write and reports the same.
    """
    read = _read(source, path, ImportLimits.from_settings())
    # The main paths first: they are the conversations; branches get what is left.
    budget = [read.entries_budget - sum(len(c.main) for c in read.conversations)]
    if budget[0] < 0:
        raise ImportTooLarge(
            f"the file's conversations hold more than {read.entries_budget} messages "
            "(IMPORT_MAX_ENTRIES, at most 4 per node of the file)"
        )
    plans = [_plan(conversation, budget) for conversation in read.conversations]
    report = ForeignImportReport(source=source, dry_run=dry_run)
    for conversation, plan in zip(read.conversations, plans, strict=True):
        try:
            with transaction.atomic():
                get_user_model().objects.select_for_update().filter(pk=owner_id).first()
                _write(owner_id=owner_id, conversation=conversation, plan=plan, dry_run=dry_run)
        except (DatabaseError, SessionNotFound, ValueError) as error:
            # The database refused a value, or a session this import branches from went away
            # (deleted, or shorter than the cut) since it was found: this conversation only.
            logger.exception("import of %s refused by the database", conversation.source_id)
            for planned in plan:
                if not planned.outcome.error:
                    planned.outcome = _refused(
                        planned.outcome.source_id,
                        planned.outcome.entries,
                        f"not written, nothing of this conversation was kept: {error}",
                    )
        report.outcomes.extend(planned.outcome for planned in plan)
    return report
