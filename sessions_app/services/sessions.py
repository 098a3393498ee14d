"""A session's life: create, branch, choose its model, compact, cost, export.

Every write is a service (docs/design.md §16: one module per action family)."""

from __future__ import annotations

import json
import os
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import transaction

from jarvis_site.shared.errors import Code, DomainError
from sessions_app import selectors
from sessions_app.core.ids import (
    is_reserved,
    new_session_id,
    reserved_refuse,
    safe_filename,
    validate_session_id,
)
from sessions_app.core.owners import OwnerId
from sessions_app.runtime.context.history import repair_entries
from sessions_app.runtime.providers import check_model_spec
from sessions_app.runtime.turn import cost, usage
from sessions_app.runtime.turn.agents import agent_known, model_for_session
from sessions_app.runtime.turn.lease import TurnLease, lease_acquire
from sessions_app.services import compaction
from sessions_app.services.branch_summaries import branch_summary_entry
from sessions_app.services.broadcasts import session_broadcast_on_commit
from sessions_app.services.session_events import CREATED, session_changed_on_commit
from sessions_app.store import (
    EntryRecord,
    NewEntry,
    SessionExists,
    SessionMeta,
    SessionNotFound,
    get_store,
)
from sessions_app.store.base import THINKING_LEVELS
from sessions_app.store.blobs import blob_links_copy
from sessions_app.store.usage_ledger import usage_ledger_copy

# The sender of the signals sent here: receivers go by the kwargs, never by the sender.
SIGNAL_SENDER = "sessions_app.services"

EXPORT_FORMATS = selectors.EXPORT_FORMATS


class SessionIdUnavailable(DomainError):
    """The id belongs to another user, or a branch asked for an id already taken (409)."""

    code = Code.ID_UNAVAILABLE


@dataclass(frozen=True)
class ExportFile:
    filename: str
    content_type: str
    content: bytes
    path: Path


def session_create(
    *, owner_id: int, session_id: str | None = None, agent: str = "jarvis", title: str = ""
) -> tuple[SessionMeta, bool]:
    """Create a session for `owner_id`, or return theirs if it exists with the same agent.

    Returns (meta, created). Raises InvalidSessionId, ReservedSessionId (a sub-agent's id
    that is not the caller's session already), UnknownAgent (a new session of an agent that
    is not defined), AgentMismatch, or SessionIdUnavailable when the id is another user's.
    """
    store = get_store()
    session_id = validate_session_id(session_id) if session_id else new_session_id()
    existing = store.get_meta(session_id)
    mine = existing is not None and existing.owner_id == owner_id
    if is_reserved(session_id) and not mine:
        # Missing or another user's alike: the answer tells nobody which exist.
        raise reserved_refuse(session_id)
    if existing is not None and not mine:
        raise SessionIdUnavailable(f"session id {session_id!r} is not available")
    if existing is None:
        agent_known(agent)
    meta = store.create(session_id, agent=agent, owner_id=owner_id, title=title)
    if meta.owner_id != owner_id:  # another user created it in between
        raise SessionIdUnavailable(f"session id {session_id!r} is not available")
    if existing is None:
        session_changed_on_commit(meta=meta, action=CREATED)
    return meta, existing is None


BRANCH_TURN_ERROR = "the branch was cut before this turn finished"


BRANCH_RESULT_TEXT = "outcome unknown: the branch was cut while this tool ran"


def session_branch(
    *,
    session_id: str,
    owner_id: int,
    new_id: str | None = None,
    at_seq: int | None = None,
) -> SessionMeta:
    """Copy the caller's session (up to `at_seq`) into a new session they own.

    Steps: check the session is the caller's; read the entries of the turn the cut falls in
    (without `at_seq`, the cut is the last entry stored, read from the entries themselves:
    a jsonl meta file can lag behind them after a crash); if the cut leaves that turn open,
    repair it (an error result for each call without one, then a `turn_end` `interrupted`),
    so a branch is always a valid history; when the cut abandons entries, summarize them
    (perhaps by the model, so before anything is locked) into a `branch_summary` entry;
    the store copies the entries and appends the repair and the summary in one step,
    refusing if the source was deleted (or made anew) since it was read; the source's usage
    ledger rows up to the cut are copied with them (inherited, docs/design.md §22).

    Raises SessionNotFound (missing or not theirs), SessionIdUnavailable (id taken),
    ReservedSessionId (a sub-agent's id), ValueError (at_seq outside the history).
    """
    source = selectors.session_get(session_id=session_id, owner_id=owner_id)
    if new_id is not None and is_reserved(validate_session_id(new_id)):
        raise reserved_refuse(new_id)
    if at_seq is not None and int(at_seq) < 0:
        raise ValueError(f"at_seq must be 0 or more, not {at_seq!r}")
    store = get_store()
    tail = store.get_turn_tail(session_id, None if at_seq is None else int(at_seq))
    cut = int(at_seq) if at_seq is not None else (tail[-1].seq if tail else 0)
    # Entries up to the cut never change within one incarnation: passing the incarnation
    # read here makes the store copy exactly the entries this repair was made for.
    closing = repair_entries(tail, result_text=BRANCH_RESULT_TEXT, turn_error=BRANCH_TURN_ERROR)
    if at_seq is not None:
        abandoned = store.get_messages(session_id, after_seq=cut)
        if abandoned:
            closing.append(
                branch_summary_entry(source_id=session_id, at_seq=cut, abandoned=abandoned)
            )
    try:
        # On the db backend the copy and its usage rows commit together.
        with transaction.atomic():
            branch = store.create_branch(
                session_id,
                new_id=new_id,
                at_seq=cut,
                owner_id=owner_id,
                closing=closing,
                incarnation=source.incarnation,
            )
            usage_ledger_copy(source_id=session_id, new_id=branch.id, up_to_seq=cut)
            blob_links_copy(source_id=session_id, new_id=branch.id)
            session_changed_on_commit(meta=branch, action=CREATED)
    except SessionExists as error:
        raise SessionIdUnavailable(f"session id {new_id!r} is already taken") from error
    return branch


def session_configure(
    *,
    session_id: str,
    owner_id: int | None,
    model: str | None = None,
    thinking: str | None = None,
) -> SessionMeta:
    """Set the model and/or the thinking level the caller's session uses from its next turn.

    Steps: check the values and the session; take the turn lease (a change lands between
    turns, never inside one: SessionBusy after BUSY_GRACE_SEC); in one transaction store
    each setting that changes and append its entry — `model_change` {from, to} when the
    effective model changes, `thinking_change` {from, to} (docs/design.md §20) — which
    every open tab receives after the commit; release. A value the session already has
    changes nothing.
    """
    if model is not None:
        model = check_model_spec(model)
    if thinking is not None and thinking not in THINKING_LEVELS:
        raise ValueError(f"thinking is one of {', '.join(THINKING_LEVELS)}, not {thinking!r:.40}")
    selectors.session_get(session_id=session_id, owner_id=owner_id)
    store = get_store()
    lease = lease_acquire(session_id=session_id, wait_sec=settings.BUSY_GRACE_SEC)
    try:
        meta = store.get_meta(session_id)
        if meta is None:
            raise SessionNotFound(session_id)
        changes = []
        with transaction.atomic():
            if model is not None and meta.model != model:
                before = model_for_session(agent=meta.agent, model=meta.model)
                store.set_model(session_id, model)
                if before != model:
                    changes.append(
                        NewEntry(kind="model_change", data={"from": before, "to": model})
                    )
            if thinking is not None and meta.thinking != thinking:
                store.set_thinking(session_id, thinking)
                changes.append(
                    NewEntry(kind="thinking_change", data={"from": meta.thinking, "to": thinking})
                )
            for entry in store.append(session_id, changes):
                session_broadcast_on_commit(
                    session_id=session_id,
                    event={"type": "entry", "entry": selectors.entry_to_api(entry)},
                )
        return store.get_meta(session_id)
    finally:
        lease.release()


# The per-session lock of `session_delete` and `connection_open`. Only the race experiment
# (scripts/experiments/session_race.py) turns it off, to show what it prevents; no setting
# or environment variable reaches it.
_SESSION_LOCKING = True


@contextmanager
def session_locked(session_id: str, *, agent: str, owner_id: int | None):
    """One transaction holding the session's lock (`store.locked`); yields whether a lock is
    held (a session without data may have nothing to lock)."""
    if not _SESSION_LOCKING:
        yield False
        return
    with get_store().locked(session_id, agent=agent, owner_id=owner_id) as locked:
        yield locked


def session_turn_running(*, session_id: str) -> bool:
    """Whether a turn of the session runs now, in any process: its turn lease is held.

    Asked by taking the lease and giving it back at once; a turn that starts meanwhile
    waits for it (BUSY_GRACE_SEC), it is not refused.
    """
    lease = TurnLease.for_session(session_id)
    if not lease.backend.try_acquire():
        return True
    lease.backend.release()
    return False


def session_export(*, session_id: str, owner_id: OwnerId, fmt: str) -> ExportFile:
    """Render the session as md or json and also write it to EXPORTS_DIR/<owner>/<safe id>.<fmt>,
    where it is kept for its owner, after the session's delete too (selectors.kept_exports).

    Steps: check the session is the caller's (SessionNotFound otherwise; OPERATOR exports
    anyone's, into its owner's directory); render; write a temp file with a name of its own
    in the owner's directory; rename it over the export in one step. Concurrent exports of
    one session never share a temp file, and a reader never sees half a file. Each user has
    a directory because safe names collide across ids ("a.1" and "a_1"), and one user's
    export must never replace another's.
    """
    if fmt not in EXPORT_FORMATS:
        raise ValueError(f"export format is md or json, not {fmt!r}")
    meta = selectors.session_get(session_id=session_id, owner_id=owner_id)
    store = get_store()
    entries = store.get_messages(session_id)
    notices = store.get_proactive(session_id)
    if fmt == "md":
        text = selectors.export_markdown(meta, entries, notices)
        content_type = "text/markdown; charset=utf-8"
    else:
        text = json.dumps(
            selectors.export_json(meta, entries, notices), ensure_ascii=False, indent=2
        )
        content_type = "application/json"
    content = text.encode("utf-8")
    filename = f"{safe_filename(session_id)}.{fmt}"
    owner_dir = selectors.exports_dir(meta.owner_id)
    owner_dir.mkdir(parents=True, exist_ok=True)
    path = owner_dir / filename
    descriptor, tmp_name = tempfile.mkstemp(dir=owner_dir, prefix=f".{filename}.", suffix=".tmp")
    try:
        with os.fdopen(descriptor, "wb") as tmp:
            tmp.write(content)
        os.replace(tmp_name, path)
    except BaseException:
        Path(tmp_name).unlink(missing_ok=True)
        raise
    return ExportFile(filename=filename, content_type=content_type, content=content, path=path)


class NothingToCompact(DomainError, ValueError):
    """Fewer than two turns in the model's context (409 / error `nothing_to_compact`)."""

    code = Code.NOTHING_TO_COMPACT


def session_compact(*, session_id: str, owner_id: OwnerId) -> EntryRecord:
    """Summarize the older turns of the caller's session; every open tab gets the entry.

    Steps: check the session; append the `compaction` entry (sessions_app.services.compaction, which
    asks the model before it writes anything); once that is committed, send the entry to the
    session's group. Raises NothingToCompact when fewer than two turns are in the context.
    """
    selectors.session_get(session_id=session_id, owner_id=owner_id)
    try:
        entry = compaction.compaction_append(session_id=session_id)
    except ValueError as error:
        raise NothingToCompact(str(error)) from error
    session_broadcast_on_commit(
        session_id=session_id, event={"type": "entry", "entry": selectors.entry_to_api(entry)}
    )
    return entry


def session_cost(*, session_id: str, owner_id: int | None) -> dict[str, Any]:
    """Tokens and estimated USD per model of the caller's session (runtime.turn.cost)."""
    selectors.session_get(session_id=session_id, owner_id=owner_id)
    return cost.session_cost(session_id=session_id)


def session_usage(*, session_id: str, owner_id: int | None) -> dict[str, Any]:
    """What the caller's session used and cost (runtime.turn.usage, docs/design.md §22): its own
    calls, its sub-agents' turns, and what a branch's copied entries carry (`inherited`)."""
    meta = selectors.session_get(session_id=session_id, owner_id=owner_id)
    return usage.session_usage_of(meta)
