"""Moving a user's sessions between installations and backends in the seed's file layout
(docs/design.md §20): `sessions_export` writes them, `sessions_import` reads them back.

An import never touches a session that exists: each imported session is a new one owned by
the importing user, under its source id when that id is free here (and is not a sub-agent's
`agent_…` id, which only the platform makes) and under a new server-made id otherwise. The
request headers its turns name come along, so their requests can still be rebuilt. It is recorded by what it was in the source (`ImportedSession`:
source id and creation time), so importing the same directory again adds nothing. Histories
that break the pairing rules of §5 are repaired on the way in, and the report says how.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils import timezone

from sessions_app.core.ids import is_reserved, new_session_id
from sessions_app.formats.seed_files import (
    HEADERS_FILE,
    SeedFileError,
    SeedSession,
    read_directory,
    read_headers,
    write_headers,
    write_session,
)
from sessions_app.models import ImportedSession
from sessions_app.runtime.context.history import (
    HistoryInvalid,
    calls_made,
    project_anthropic,
    project_openai,
    validate_anthropic,
    validate_openai,
)
from sessions_app.runtime.sandbox.workspace import workspace_changes
from sessions_app.services.files import files_export, files_restore
from sessions_app.store import AgentMismatch, NewEntry, get_store
from sessions_app.store.base import record_from_fields
from sessions_app.store.request_headers import header_digest, header_get, header_save

IMPORT_RESULT_TEXT = "outcome unknown: no result of this tool call was in the imported history"
IMPORT_TURN_ERROR = "the turn was not finished in the imported history"


class SeedFilesInvalid(ValueError):
    """Files of the directory cannot be imported as they are; nothing was imported."""

    def __init__(self, errors: Sequence[SeedFileError]):
        super().__init__("\n".join(str(error) for error in errors))
        self.errors = list(errors)


# --- export ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class ExportedSession:
    session_id: str
    entries: int


def sessions_export(*, owner_id: int, directory: Path) -> list[ExportedSession]:
    """Write every session of the owner (sub-agents' and test sessions too) into `directory`,
    as `<id>.jsonl` and `<id>.meta.json`, the request headers their turns name, and the
    files their messages carry (`files/<sha256>`, docs/design.md §23); a file of the same
    name is replaced whole."""
    store = get_store()
    directory.mkdir(parents=True, exist_ok=True)
    exported = []
    headers: dict[str, dict] = {}
    for meta in store.list(owner_id=owner_id, include_tests=True, include_subagents=True):
        records = store.get_messages(meta.id)
        write_session(directory, meta, records)
        exported.append(ExportedSession(session_id=meta.id, entries=len(records)))
        for digest in _header_digests(records):
            if digest not in headers and (body := header_get(digest)) is not None:
                headers[digest] = body
    write_headers(directory, headers)
    files_export(
        session_ids=[item.session_id for item in exported], directory=directory / FILES_DIR
    )
    return exported


# Where an export keeps its sessions' files, by SHA-256.
FILES_DIR = "files"


def _attachment_refs(entries: Sequence[NewEntry]) -> list[dict]:
    """Every file the entries' user messages carry, and every version of every workspace
    file their runs wrote (docs/design.md §28, marked `workspace`), once each."""
    refs: dict[str, dict] = {}
    for entry in entries:
        for ref in (entry.data or {}).get("attachments") or () if entry.role == "user" else ():
            if isinstance(ref, dict) and isinstance(ref.get("id"), str):
                refs.setdefault(ref["id"], ref)
        for path, sha256 in workspace_changes(entry).items():
            if isinstance(sha256, str):
                refs.setdefault(sha256, {"id": sha256, "name": path, "workspace": True})
    return list(refs.values())


def _header_digests(records) -> set[str]:
    return {
        r.data["header"] for r in records if r.kind == "turn_start" and (r.data or {}).get("header")
    }


def _checked_headers(directory: Path, errors: list[SeedFileError]) -> list[dict]:
    """The bodies of the directory's header file; a line whose body does not hash to its
    digest is an error (the turns naming it would rebuild requests never sent)."""
    try:
        lines = read_headers(directory)
    except SeedFileError as error:
        errors.append(error)
        return []
    bodies = []
    for number, digest, body in lines:
        if header_digest(body) != digest:
            errors.append(
                SeedFileError(
                    directory / HEADERS_FILE, number, "the body does not match its digest"
                )
            )
        else:
            bodies.append(body)
    return bodies


# --- repair ---------------------------------------------------------------------------------


@dataclass
class Repair:
    entries: list[NewEntry]
    results_added: int = 0
    turns_closed: int = 0

    def notes(self) -> list[str]:
        notes = []
        if self.results_added:
            notes.append(f"{self.results_added} error result(s) added for unanswered tool calls")
        if self.turns_closed:
            notes.append(f"{self.turns_closed} unfinished turn(s) closed as interrupted")
        return notes


def repair_history(entries: Sequence[NewEntry]) -> Repair:
    """The entries with §5's pairing restored anywhere in the history, not only at its end.

    Calls still without a result when the next user or assistant message or turn marker comes
    (history.calls_made, the pairing the turn and the projection read too) get an error result
    right before it, in call order, so results stay contiguous; a `turn_start` while a turn is
    open first closes that turn with `turn_end` `interrupted`; at the end, the same for what is
    still open.
    """
    repair = Repair(entries=[])
    out = repair.entries
    answers: dict[int, list[NewEntry]] = {}
    for made in calls_made(entries):
        missing = made.unanswered()
        answers.setdefault(made.until, []).extend(
            NewEntry(
                role="tool",
                tool_call_id=call["id"],
                name=call["name"],
                content=IMPORT_RESULT_TEXT,
                is_error=True,
                turn_id=entries[made.at].turn_id,
            )
            for call in missing
        )
        repair.results_added += len(missing)

    def close_turn(turn_id: str) -> None:
        out.append(
            NewEntry(
                kind="turn_end",
                turn_id=turn_id,
                data={"status": "interrupted", "error": IMPORT_TURN_ERROR},
            )
        )
        repair.turns_closed += 1

    open_turn: str | None = None
    for index, entry in enumerate(entries):
        out.extend(answers.pop(index, ()))
        if entry.kind == "turn_start":
            if open_turn is not None:
                close_turn(open_turn)
            open_turn = entry.turn_id
        elif entry.kind == "turn_end":
            open_turn = None
        out.append(entry)
    out.extend(answers.pop(len(entries), ()))
    if open_turn is not None:
        close_turn(open_turn)
    return repair


def check_history(entries: Sequence[NewEntry]) -> None:
    """HistoryInvalid unless both providers would accept the history's projection."""
    stamp = timezone.now()
    records = [
        record_from_fields(
            {
                "session_id": "",
                "seq": seq,
                **{name: getattr(entry, name) for name in NewEntry.__dataclass_fields__},
                "created_at": stamp,
            }
        )
        for seq, entry in enumerate(entries, start=1)
    ]
    validate_openai(project_openai(records, "system"))
    _system, messages = project_anthropic(records, "system")
    if messages:  # an empty history is a valid one (its next turn brings the first message)
        validate_anthropic(messages)


# --- import ---------------------------------------------------------------------------------


@dataclass
class ImportOutcome:
    source_id: str
    session_id: str | None  # None: a new id will be made (dry run)
    imported: bool  # False: imported before, nothing added
    entries: int
    notes: list[str] = field(default_factory=list)


@dataclass
class ImportReport:
    dry_run: bool
    outcomes: list[ImportOutcome]

    def lines(self) -> list[str]:
        lines = []
        for outcome in self.outcomes:
            target = outcome.session_id or "a new id"
            if not outcome.imported:
                lines.append(f"unchanged {outcome.source_id}: imported before as {target}")
                continue
            verb = "would import" if self.dry_run else "imported"
            line = f"{verb} {outcome.source_id} as {target} ({outcome.entries} entries)"
            lines.append("; ".join([line, *outcome.notes]))
        added = sum(1 for outcome in self.outcomes if outcome.imported)
        verb = "would be imported" if self.dry_run else "imported"
        lines.append(f"{added} of {len(self.outcomes)} session(s) {verb}")
        return lines


def _prepare(session: SeedSession) -> tuple[list[NewEntry], list[str]]:
    """The entries to store and what was done to them; HistoryInvalid as a SeedFileError."""
    notes = []
    if session.torn_line:
        notes.append(f"torn last line {session.torn_line} of {session.entries_path} left out")
    repair = repair_history(session.entries)
    notes.extend(repair.notes())
    try:
        check_history(repair.entries)
    except HistoryInvalid as error:
        raise SeedFileError(
            session.entries_path, 0, f"not a history a model accepts, even repaired: {error}"
        ) from error
    return repair.entries, notes


def _already_imported(owner_id: int, session: SeedSession) -> ImportedSession | None:
    """The record of an earlier import of this session whose session still exists here."""
    row = ImportedSession.objects.filter(
        owner_id=owner_id, source_id=session.source_id, source_created_at=session.created_at
    ).first()
    if row is None:
        return None
    meta = get_store().get_meta(row.session_id)
    return row if meta is not None and meta.owner_id == owner_id else None


def _taken(source_id: str) -> str:
    if is_reserved(source_id):
        return f"the id {source_id} is one only this server makes (sub-agent sessions)"
    return f"the id {source_id} is taken here"


def _source_id_free(source_id: str) -> bool:
    """Whether the session may keep its id here. A sub-agent id never: the platform derives
    those from the calling conversation, and one imported under a chosen name could squat the
    session another conversation's delegation will ask for (docs/design.md §6, §20)."""
    return not is_reserved(source_id) and get_store().get_meta(source_id) is None


def _create_for(owner_id: int, session: SeedSession, spawned_by: str | None):
    """A new, empty session of the owner: under the source id when nobody has that id here
    and it is not a sub-agent id, else under a new server-made id. Returns (meta, note)."""
    store = get_store()
    if _source_id_free(session.source_id):
        try:
            meta = store.create(
                session.source_id,
                agent=session.agent,
                owner_id=owner_id,
                title=session.title,
                spawned_by=spawned_by,
            )
        except AgentMismatch:
            meta = None  # made for another agent since the check above
        # Fresh: ours and empty. Someone may have taken the id since the check above.
        if meta is not None and meta.owner_id == owner_id and meta.last_seq == 0:
            return meta, None
    meta = store.create(
        new_session_id(),
        agent=session.agent,
        owner_id=owner_id,
        title=session.title,
        spawned_by=spawned_by,
    )
    return meta, _taken(session.source_id)


def _import_one(
    *,
    owner_id: int,
    session: SeedSession,
    entries: list[NewEntry],
    notes: list[str],
    new_ids: dict[str, str],
    dry_run: bool,
    files_dir: Path | None = None,
) -> ImportOutcome:
    """Skip the session if an earlier import brought it and it is still here; else (unless
    a dry run) create it, set its model, append its entries in one batch, link the files
    its messages carry (from `files_dir`) and record where it came from."""
    earlier = _already_imported(owner_id, session)
    if earlier is not None:
        return ImportOutcome(
            source_id=session.source_id,
            session_id=earlier.session_id,
            imported=False,
            entries=len(entries),
        )
    store = get_store()
    if dry_run:
        free = _source_id_free(session.source_id)
        return ImportOutcome(
            source_id=session.source_id,
            session_id=session.source_id if free else None,
            imported=True,
            entries=len(entries),
            notes=notes if free else [_taken(session.source_id), *notes],
        )
    spawned_by = new_ids.get(session.spawned_by) if session.spawned_by else None
    meta, taken = _create_for(owner_id, session, spawned_by)
    if session.model:
        store.set_model(meta.id, session.model)
    if entries:
        store.append(meta.id, entries, incarnation=meta.incarnation)
    refs = _attachment_refs(entries)
    if refs and files_dir is not None:
        notes = [
            *notes,
            *files_restore(session_id=meta.id, owner_id=owner_id, refs=refs, directory=files_dir),
        ]
    ImportedSession.objects.update_or_create(
        owner_id=owner_id,
        source_id=session.source_id,
        source_created_at=session.created_at,
        defaults={"session_id": meta.id, "imported_at": timezone.now()},
    )
    return ImportOutcome(
        source_id=session.source_id,
        session_id=meta.id,
        imported=True,
        entries=len(entries),
        notes=[taken, *notes] if taken else notes,
    )


def sessions_import(*, owner_id: int, directory: Path, dry_run: bool = False) -> ImportReport:
    """Import every session of `directory` for the owner; returns the report.

    Steps: read and check every file, and repair every history (SeedFilesInvalid naming
    each damaged file and line, before anything is written); then each session
    (`_import_one`), callers before sub-agents so that a sub-agent's `spawned_by` can name
    its caller's id here, in a transaction of its own. A dry run stops before the first
    write and reports the same.
    """
    sessions, errors = read_directory(directory)
    headers = _checked_headers(directory, errors)
    prepared = {}
    for session in sessions:
        try:
            prepared[session.source_id] = _prepare(session)
        except SeedFileError as error:
            errors.append(error)
    if errors:
        raise SeedFilesInvalid(errors)
    if not dry_run:
        for body in headers:  # shared by digest: saving one already here changes nothing
            header_save(body)
    new_ids: dict[str, str] = dict(
        ImportedSession.objects.filter(owner_id=owner_id).values_list("source_id", "session_id")
    )
    outcomes = []
    for session in sorted(sessions, key=lambda s: (s.spawned_by is not None, s.created_at)):
        entries, notes = prepared[session.source_id]
        with transaction.atomic():
            # The owner's row: two imports for one user take turns, so that both never
            # find a session missing and create it twice.
            get_user_model().objects.select_for_update().filter(pk=owner_id).first()
            outcome = _import_one(
                owner_id=owner_id,
                session=session,
                entries=entries,
                notes=notes,
                new_ids=new_ids,
                dry_run=dry_run,
                files_dir=directory / FILES_DIR,
            )
        if outcome.session_id is not None:
            new_ids[session.source_id] = outcome.session_id
        outcomes.append(outcome)
    return ImportReport(dry_run=dry_run, outcomes=outcomes)
