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

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils import timezone

from sessions_app.foreign_formats import (
    ForeignConversation,
    ForeignFormatInvalid,
    chatgpt_read,
    openai_agents_read,
)
from sessions_app.ids import new_session_id
from sessions_app.models import ImportedSession
from sessions_app.runtime.history import HistoryInvalid
from sessions_app.services.transfer import check_history, repair_history
from sessions_app.store import NewEntry, get_store

SOURCES = ("chatgpt", "openai-agents")

__all__ = ["SOURCES", "ForeignFormatInvalid", "ForeignImportReport", "history_import"]


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


def _imported_before(owner_id: int, source_id: str, created_at: datetime) -> str | None:
    """The session an earlier import made of this source, if it is still the owner's."""
    session_id = (
        ImportedSession.objects.filter(
            owner_id=owner_id, source_id=source_id, source_created_at=created_at
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
        source_id=source_id,
        source_created_at=created_at,
        defaults={"session_id": session_id, "imported_at": timezone.now()},
    )


def _import_conversation(
    *, owner_id: int, conversation: ForeignConversation, dry_run: bool
) -> list[ForeignOutcome]:
    """The conversation's session, then its branches; the caller holds the transaction."""
    store = get_store()
    try:
        main, repairs = _checked(conversation.main)
    except HistoryInvalid as error:
        return [
            ForeignOutcome(
                source_id=conversation.source_id,
                session_id=None,
                imported=False,
                entries=len(conversation.main),
                error=f"not a history a model accepts, even repaired: {error}",
            )
        ]
    main_id = _imported_before(owner_id, conversation.source_id, conversation.created_at)
    outcomes = [
        ForeignOutcome(
            source_id=conversation.source_id,
            session_id=main_id,
            imported=main_id is None,
            entries=len(main),
            notes=[*conversation.notes, *repairs],
        )
    ]
    if main_id is None and not dry_run:
        meta = store.create(new_session_id(), owner_id=owner_id, title=conversation.title)
        if main:
            store.append(meta.id, main, incarnation=meta.incarnation)
        _record(owner_id, conversation.source_id, conversation.created_at, meta.id)
        main_id = outcomes[0].session_id = meta.id
    seen: list[list[NewEntry]] = [main]
    for branch in conversation.branches:
        try:
            entries, repairs = _checked(branch.entries)
        except HistoryInvalid as error:
            outcomes.append(
                ForeignOutcome(
                    source_id=branch.source_id,
                    session_id=None,
                    imported=False,
                    entries=len(branch.entries),
                    error=f"not a history a model accepts, even repaired: {error}",
                )
            )
            continue
        # A path that adds nothing to one already taken (a hidden leaf, an empty retry).
        if any(_common_prefix(entries, other) == len(entries) for other in seen):
            continue
        seen.append(entries)
        at_seq = _common_prefix(main, entries)
        branch_id = _imported_before(owner_id, branch.source_id, conversation.created_at)
        outcome = ForeignOutcome(
            source_id=branch.source_id,
            session_id=branch_id,
            imported=branch_id is None,
            entries=len(entries),
            parent_id=main_id,
            branched_at_seq=at_seq,
            notes=[*branch.notes, *repairs],
        )
        outcomes.append(outcome)
        if branch_id is not None or dry_run:
            continue
        copy = store.create_branch(main_id, at_seq=at_seq, owner_id=owner_id)
        if entries[at_seq:]:
            store.append(copy.id, entries[at_seq:], incarnation=copy.incarnation)
        _record(owner_id, branch.source_id, conversation.created_at, copy.id)
        outcome.session_id = copy.id
    return outcomes


def _read(source: str, path: Path) -> list[ForeignConversation]:
    if source == "chatgpt":
        return chatgpt_read(path.read_bytes())
    if source == "openai-agents":
        return openai_agents_read(path)
    raise ValueError(f"the source is one of {', '.join(SOURCES)}, not {source!r}")


def history_import(
    *, owner_id: int, source: str, path: Path, dry_run: bool = False
) -> ForeignImportReport:
    """Import every conversation of the file for the owner; returns the report.

    Steps: read the whole file (ForeignFormatInvalid, before anything is written, when it
    is not a `source` file); then each conversation in a transaction of its own holding the
    owner's row (two imports for one user take turns, so both never find a conversation
    missing and make it twice): its session, then its branches. A dry run stops before the
    first write and reports the same.
    """
    conversations = _read(source, path)
    report = ForeignImportReport(source=source, dry_run=dry_run)
    for conversation in conversations:
        with transaction.atomic():
            get_user_model().objects.select_for_update().filter(pk=owner_id).first()
            report.outcomes.extend(
                _import_conversation(owner_id=owner_id, conversation=conversation, dry_run=dry_run)
            )
    return report
