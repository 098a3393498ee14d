"""Every write to sessions that the web, the API and the WebSocket make (docs/design.md §6–§8).

The store (sessions_app.store) holds conversations and whatever differs between backends,
and the registry of live connections; this module adds ownership, the checks against live
connections that make delete safe, exports, proactive notices and the channel-layer
broadcasts that keep every open tab of a session in step.

Locking rule shared by `session_delete` and `connection_open`: both take the session's lock
(`store.locked`: one transaction holding it) before they look at live connections or at the
conversation, so each sees the other whole.
"""

from __future__ import annotations

import asyncio
import enum
import inspect
import json
import logging
import os
import tempfile
import time
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from jarvis_site import metrics
from sessions_app import compaction, limits, live, selectors
from sessions_app.agents import agent_known, model_for_session, per_parent_session_ids
from sessions_app.branch_summaries import branch_summary_entry
from sessions_app.ids import (
    group_name,
    is_reserved,
    new_session_id,
    reserved_refuse,
    safe_filename,
    validate_session_id,
)
from sessions_app.runtime import cost, turns
from sessions_app.runtime.approvals import approval_resolve
from sessions_app.runtime.executors import in_pool
from sessions_app.runtime.history import repair_entries
from sessions_app.runtime.lease import SessionBusy, TurnLease, lease_acquire
from sessions_app.runtime.providers import check_model_spec
from sessions_app.runtime.queue import queue_clear
from sessions_app.signals import notice_added, session_deleted, session_ended
from sessions_app.store import (
    EntryRecord,
    NewEntry,
    Notice,
    SessionExists,
    SessionMeta,
    SessionNotFound,
    connections,
    get_store,
)
from sessions_app.store import approvals as approval_rows
from sessions_app.store.base import THINKING_LEVELS
from sessions_app.workers import heartbeat_start

logger = logging.getLogger(__name__)

# A consumer renews its connection row every HEARTBEAT_SEC, well within the registry's
# LIVE_TIMEOUT_SEC (sessions_app.store.connections) after which a row no longer counts.
HEARTBEAT_SEC = 10
# The sender of the signals sent here: receivers go by the kwargs, never by the sender.
SIGNAL_SENDER = "sessions_app.services"
EXPORT_FORMATS = ("md", "json")


class SessionConnected(Exception):
    """Delete refused: a WebSocket is attached to the session (409 session_connected)."""

    code = "session_connected"


class SessionIdUnavailable(Exception):
    """The id belongs to another user, or a branch asked for an id already taken (409)."""

    code = "id_unavailable"


@dataclass(frozen=True)
class ExportFile:
    filename: str
    content_type: str
    content: bytes
    path: Path


# --- channel-layer broadcasts -------------------------------------------------------------


def session_broadcast(*, session_id: str, event: dict[str, Any]) -> None:
    """Send one WebSocket event (docs/design.md §8) to every connection of a session, in any process.

    Callable from synchronous code only (services, the turn thread); async callers await
    the channel layer themselves.
    """
    layer = get_channel_layer()
    if layer is None:
        return
    async_to_sync(layer.group_send)(
        group_name(session_id), {"type": "session.event", "event": event}
    )
    metrics.EVENTS_SENT.inc()


def session_broadcast_on_commit(*, session_id: str, event: dict[str, Any]) -> None:
    # Clients must never hear about a change that was rolled back.
    transaction.on_commit(lambda: session_broadcast(session_id=session_id, event=event))


# Streamed text reaches the sockets at most once per DELTA_INTERVAL_SEC per turn: one event
# per token would flood the other workers (and every tab) long before anyone can read that fast.
DELTA_INTERVAL_SEC = 0.05


def turn_event_broadcaster(session_id: str, *, clock=time.monotonic):
    """An `on_event` coroutine for turn_run that hands the turn's events to every socket of
    the session (sessions_app.live: numbered, folded into the running state, delivered to
    this worker's sockets directly and published once for the other workers).

    - Entries arrive as EntryRecord objects and leave as the API shows them.
    - `delta`s are coalesced: a piece that arrives within DELTA_INTERVAL_SEC of the last
      `delta` sent waits, and leaves joined with the next piece that arrives after the
      interval, or just before the turn's next other event, so the order tabs see is the
      order of the turn.

    The turn's event pump awaits it on the event loop, beside the turn, one event at a time.
    """
    pending: list[str] = []
    state: dict[str, Any] = {"turn": None, "sent_at": None}

    async def send(event: dict[str, Any]) -> None:
        if event["type"] == "agent_start":
            state["turn"] = await live.turn_begin(session_id=session_id, turn_id=event["turn_id"])
        if state["turn"] is None:
            return  # a listener joined after the start: nothing to number its events from
        await live.turn_event(state["turn"], event)
        if event["type"] == "agent_end":
            await live.turn_finish(state["turn"])
            state["turn"] = None

    async def flush() -> None:
        if pending:
            text = "".join(pending)
            pending.clear()
            state["sent_at"] = clock()
            await send({"type": "delta", "text": text})

    async def on_event(event: dict[str, Any]) -> None:
        kind = event.get("type")
        if kind == "delta":
            pending.append(event.get("text", ""))
            sent_at = state["sent_at"]
            if sent_at is None or clock() - sent_at >= DELTA_INTERVAL_SEC:
                await flush()
            return
        await flush()
        if kind == "entry" and isinstance(event.get("entry"), EntryRecord):
            event = {**event, "entry": selectors.entry_to_api(event["entry"])}
        await send(event)

    async def close() -> None:
        # A turn cut short without agent_end (its session deleted under it) must not stay
        # joinable: a socket of a session re-created with the id would see it running.
        if state["turn"] is not None:
            await live.turn_finish(state["turn"])
            state["turn"] = None

    on_event.close = close
    return on_event


# --- sessions -----------------------------------------------------------------------------


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
    refusing if the source was deleted (or made anew) since it was read.

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
        return store.create_branch(
            session_id,
            new_id=new_id,
            at_seq=cut,
            owner_id=owner_id,
            closing=closing,
            incarnation=source.incarnation,
        )
    except SessionExists as error:
        raise SessionIdUnavailable(f"session id {new_id!r} is already taken") from error


def session_set_model(*, session_id: str, owner_id: int | None, model: str) -> SessionMeta:
    """Set the model the caller's session uses from its next turn on (`session_configure`)."""
    return session_configure(session_id=session_id, owner_id=owner_id, model=model)


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
def _session_locked(session_id: str, *, agent: str, owner_id: int | None):
    """One transaction holding the session's lock (`store.locked`); yields whether a lock is
    held (a session without data may have nothing to lock)."""
    if not _SESSION_LOCKING:
        yield False
        return
    with get_store().locked(session_id, agent=agent, owner_id=owner_id) as locked:
        yield locked


def _turn_stopped(session_id: str) -> TurnLease | None:
    """Abort the session's running turn (in any process), wait for it to end, and hold the
    turn lease so that no other turn starts; None when the session is gone meanwhile.

    Raises SessionBusy when the turn does not end within BUSY_GRACE_SEC.
    """
    turns.turn_abort(session_id=session_id)
    try:
        return lease_acquire(session_id=session_id, wait_sec=settings.BUSY_GRACE_SEC)
    except SessionNotFound:
        return None


def session_delete(*, session_id: str, owner_id: int) -> bool:
    """Delete the caller's session with its entries, notices and memory; False if missing.

    Another user's session answers exactly like a missing one (False), so a delete tells
    nobody which ids exist. Steps:
    1. refuse with SessionConnected while a live connection is registered;
    2. stop the running turn, if any, and hold the turn lease: nothing of that turn can be
       written after the delete (SessionBusy when it does not end in time);
    3. in one transaction holding the session's lock (a concurrent `connection_open` waits
       here, then opens a new session), check the owner and the connections again, send
       `session_deleted` (memory_app purges — before anything goes, so a failing receiver
       rolls everything back), then remove the session and all it has in the store
       (`store.delete`: rows or files, its connection rows and approval requests).
    4. after the commit, its export files (`_export_files_remove`) and its
       per_parent_session sub-agent sessions (`session_delete_subagents`).
    A jsonl session's files are removed inside the transaction, while the lock is held:
    removing them after commit would let a reconnect recreate the session first and then
    lose its files.
    """
    validate_session_id(session_id)
    store = get_store()
    meta = store.get_meta(session_id)
    if meta is None or meta.owner_id != owner_id:
        return False
    if connections.any_live(session_id):
        raise SessionConnected("the session is open in a browser tab or another client")
    lease = _turn_stopped(session_id)
    if lease is None:
        return False
    try:
        with _session_locked(session_id, agent=meta.agent, owner_id=owner_id) as locked:
            if locked:
                meta = store.get_meta(session_id)  # re-read under the lock
            if meta is None or meta.owner_id != owner_id:
                return False
            if connections.any_live(session_id):
                raise SessionConnected("the session is open in a browser tab or another client")
            _session_remove(store, session_id=session_id, owner_id=owner_id)
    finally:
        lease.release()
    logger.info("session %s deleted by user %s", session_id, owner_id)
    transaction.on_commit(
        lambda: _export_files_remove(store, session_id=session_id, owner_id=owner_id)
    )
    session_delete_subagents(parent_id=session_id, owner_id=owner_id)
    return True


def _export_files_remove(store, *, session_id: str, owner_id: int) -> None:
    """Remove the export files (`session_export`) of a deleted session: a copy of the
    conversation must not outlive it. Safe names collide across ids ("a.1", "a_1"): while
    another session of the owner has the same name, the files may be its and stay."""
    name = safe_filename(session_id)
    owner_dir = Path(settings.EXPORTS_DIR) / str(owner_id)
    paths = [owner_dir / f"{name}.{fmt}" for fmt in EXPORT_FORMATS]
    if not any(path.exists() for path in paths):
        return
    if any(safe_filename(meta.id) == name for meta in store.list(owner_id=owner_id)):
        return
    for path in paths:
        path.unlink(missing_ok=True)


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


def session_delete_subagents(*, parent_id: str, owner_id: int | None) -> list[str]:
    """Delete the per_parent_session sub-agent sessions of a deleted session; their ids.

    Each goes through `session_delete` (memory purged, its own checks), after the parent's
    delete has committed: a sub-agent session that cannot go now (open in a tab, busy) stays
    and is removed later by `/cleanup agents`, since its parent is gone. Sub-agents of other
    policies are not the parent's: per_task sessions are deleted by their call, per_agent
    ones outlive every conversation.
    """
    store = get_store()
    removed = []
    for agent, session_id in per_parent_session_ids(parent_id=parent_id, owner_id=owner_id):
        meta = store.get_meta(session_id)
        if meta is None or meta.spawned_by != parent_id or meta.agent != agent:
            continue
        try:
            if session_delete(session_id=session_id, owner_id=owner_id):
                removed.append(session_id)
        except Exception:  # noqa: BLE001 - the parent is gone either way; cleanup finishes
            logger.exception("sub-agent session %s of %s was not deleted", session_id, parent_id)
    return removed


def _session_remove(store, *, session_id: str, owner_id: int | None) -> None:
    """Step 3 of a delete after the checks; the caller holds the transaction and the lock."""
    session_deleted.send(sender=SIGNAL_SENDER, session_id=session_id, owner_id=owner_id)
    queue_clear(session_id=session_id)
    store.delete(session_id)


def sessions_delete_for_owner(*, owner_id: int) -> int:
    """Delete every session of a user whose account is being deleted; returns how many.

    The database would cascade the user's session rows by itself, but that skips the
    memory purge (`session_deleted`) and never reaches jsonl files. Open connections do not
    block this: the account they belong to is going away. Every purge runs before any
    session is erased, so a purge that fails leaves every jsonl file in place.
    """
    store = get_store()
    doomed = store.list(owner_id=owner_id)
    leases = []
    for meta in doomed:
        try:
            lease = _turn_stopped(meta.id)
        except SessionBusy:
            # The account goes regardless; the turn's own writes are refused once its
            # session is gone (they are fenced to the session's incarnation).
            lease = None
        if lease is not None:
            leases.append(lease)
    try:
        with transaction.atomic():
            _owner_sessions_remove(store, owner_id=owner_id, doomed=doomed)
    finally:
        for lease in leases:
            lease.release()
    removed = len(doomed)
    logger.info("%d sessions of deleted user %s removed", removed, owner_id)
    return removed


def _owner_sessions_remove(store, *, owner_id: int, doomed: list[SessionMeta]) -> None:
    # Every purge runs before any session is erased: a purge that fails leaves every jsonl
    # file in place (the caller's transaction rolls the rows back). Each lock is held until
    # the caller's transaction ends.
    for meta in doomed:
        with store.locked(meta.id, agent=meta.agent, owner_id=owner_id):
            session_deleted.send(sender=SIGNAL_SENDER, session_id=meta.id, owner_id=owner_id)
    for meta in doomed:
        queue_clear(session_id=meta.id)
        store.delete(meta.id)


# --- tool approvals ------------------------------------------------------------------------


def approval_decide(*, session_id: str, owner_id: int, call_id: str, allow: bool) -> str:
    """Record the person's answer to a pending approval request; returns the new status.

    Steps: check the session is the caller's (else SessionNotFound, as for a missing one);
    switch the request from `pending` to `allowed` or `denied` in one conditional UPDATE, so
    of two answers from two tabs or workers exactly one counts (ApprovalNotFound for an
    unknown call, ApprovalClosed when the request was answered or ended already); after
    commit, wake the waiting turn if it runs in this process. A turn in another process reads
    the decision in its lease keeper's next poll. A call id with NUL or over
    CALL_ID_MAX_CHARS: InputInvalid.
    """
    validate_session_id(session_id)
    limits.text_check(
        call_id, name="the call id", max_chars=approval_rows.CALL_ID_MAX_CHARS, min_chars=1
    )
    meta = get_store().get_meta(session_id)
    if meta is None or meta.owner_id != owner_id:
        raise SessionNotFound(session_id)
    status = approval_rows.ALLOWED if allow else approval_rows.DENIED
    with transaction.atomic():
        approval_id = approval_rows.request_decide(
            session_id=session_id, call_id=call_id, status=status
        )
        transaction.on_commit(lambda: approval_resolve(approval_id, status))
    return status


# --- live connections ---------------------------------------------------------------------


def connection_open(
    *, session_id: str, channel_name: str, user_id: int, agent: str = "jarvis"
) -> tuple[SessionMeta, bool]:
    """Register a WebSocket on a session, creating the session if it does not exist.

    Steps, in one transaction holding the session's lock: read or create the session, check
    the owner, register the connection. A delete running at the same time either sees this
    connection (409) or finishes first, and then this opens a new, empty session. Returns
    (meta, created). Raises SessionNotFound for another user's session, ReservedSessionId
    for a sub-agent's id that is not the caller's session, UnknownAgent when a new session
    would get an agent that is not defined.
    """
    validate_session_id(session_id)
    if settings.WORKER_HEARTBEAT:
        heartbeat_start()  # this worker's sockets count only while it is heard from
    store = get_store()
    with _session_locked(session_id, agent=agent, owner_id=user_id):
        meta = store.get_meta(session_id)
        if is_reserved(session_id) and (meta is None or meta.owner_id != user_id):
            # A user opens their sub-agent sessions, never makes one.
            raise reserved_refuse(session_id)
        created = meta is None
        if created:
            agent_known(agent)
            meta = store.create(session_id, agent=agent, owner_id=user_id)
        if meta.owner_id != user_id:
            raise SessionNotFound(session_id)
        connections.register(session_id=session_id, channel_name=channel_name, user_id=user_id)
    return meta, created


def live_connection_count(*, session_id: str) -> int:
    """Connections attached to a session now (rows of dead workers do not count)."""
    return connections.live_count(session_id)


def connection_heartbeat(*, channel_name: str) -> bool:
    """Renew a connection's row; False when it is gone (swept, or its session was deleted)."""
    return connections.renew(channel_name=channel_name)


def connection_close(*, channel_name: str) -> bool:
    """Unregister a connection; when it was the session's last live one, send `session_ended`.

    Returns whether the session ended. The registry locks the session while it removes the
    row, so that two tabs closing at once cannot both see the other still open.
    """
    with transaction.atomic():
        closed = connections.unregister(channel_name=channel_name)
        if closed is None or not closed.last:
            return False
        transaction.on_commit(
            lambda: session_ended.send(
                sender=SIGNAL_SENDER, session_id=closed.session_id, owner_id=closed.user_id
            )
        )
    return True


# --- proactive notices --------------------------------------------------------------------


def proactive_add(
    *, session_id: str, message_id: str, content: str, owner_id: int | None = None
) -> tuple[Notice, bool]:
    """Add a 🔔 notice once per message_id; open tabs get a `proactive` event after commit.

    `owner_id` given (API calls) restricts the session to that owner; the agent's own
    callers (schedules, goals) pass None. Raises InputInvalid for content or a message_id
    outside the input limits (NUL characters, too long, empty).
    """
    limits.message_id_check(message_id)
    limits.notice_check(content)
    if owner_id is not None:
        selectors.session_get(session_id=session_id, owner_id=owner_id)
    with transaction.atomic():
        notice, created = get_store().append_proactive(session_id, message_id, content)
        if created:
            # Inside the transaction: what the receivers queue (notices_app's outbound
            # deliveries) commits with the notice or not at all.
            notice_added.send(sender=SIGNAL_SENDER, session_id=session_id, notice=notice)
            session_broadcast_on_commit(
                session_id=session_id,
                event={"type": "proactive", "notice": selectors.notice_to_api(notice)},
            )
    return notice, created


def notice_mark_delivered(*, session_id: str, message_id: str) -> Notice | None:
    """Record that a notice reached the person (a socket, or an outbound channel's success);
    the first time wins."""
    return get_store().mark_proactive_delivered(session_id, message_id, timezone.now())


# --- export -------------------------------------------------------------------------------


def session_export(*, session_id: str, owner_id: OwnerId, fmt: str) -> ExportFile:
    """Render the session as md or json and also write it to EXPORTS_DIR/<owner>/<safe id>.<fmt>.

    Steps: check the session is the caller's (SessionNotFound otherwise; OPERATOR exports
    anyone's, into its owner's directory); render; write a temp file with a name of its own
    in the owner's directory; rename it over the export in one step. Concurrent exports of
    one session never share a temp file, and a reader never sees half a file. Each user has
    a directory because safe names collide across ids ("a.1" and "a_1"), and one user's
    export must never replace another's.
    """
    if fmt not in EXPORT_FORMATS:
        raise ValueError(f"export format is md or json, not {fmt!r}")
    meta = _owned_session(session_id=session_id, owner_id=owner_id)
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
    owner_dir = Path(settings.EXPORTS_DIR) / (
        str(meta.owner_id) if meta.owner_id is not None else "system"
    )
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


# --- user actions: one service each -------------------------------------------------------
#
# What a person does to a session (send a message, stop the turn, compact, ask what it cost,
# export) has one service, whoever passes it on: the API, the WebSocket, a slash command or
# manage.py. Each checks that the session is the caller's before it writes anything (another
# user's session is SessionNotFound, exactly like a missing one), and itself sends what the
# session's open tabs must see.


class Operator(enum.Enum):
    """The `owner_id` of an operator's manage.py command, which acts on any user's session."""

    OPERATOR = "operator"


OPERATOR = Operator.OPERATOR
# A user's id, None for the system's own ownerless sessions, or OPERATOR.
OwnerId = int | None | Operator


class NothingToCompact(ValueError):
    """Fewer than two turns in the model's context (409 / error `nothing_to_compact`)."""

    code = "nothing_to_compact"


def _owned_session(*, session_id: str, owner_id: OwnerId) -> SessionMeta:
    """The session when `owner_id` may act on it; else SessionNotFound, as for a missing one."""
    if owner_id is not OPERATOR:
        return selectors.session_get(session_id=session_id, owner_id=owner_id)
    meta = get_store().get_meta(validate_session_id(session_id))
    if meta is None:
        raise SessionNotFound(session_id)
    return meta


def _turn_listener(session_id: str, also: Callable[[dict], object] | None):
    """The turn's `on_event`: the session's group, and `also` (the terminal chat) if given."""
    broadcast = turn_event_broadcaster(session_id)
    if also is None:
        return broadcast

    async def on_event(event: dict[str, Any]) -> None:
        outcome = also(event)
        if inspect.isawaitable(outcome):
            await outcome
        await broadcast(event)

    on_event.close = broadcast.close
    return on_event


def turn_send(
    *,
    session_id: str,
    owner_id: int | None,
    text: str,
    on_event: Callable[[dict], object] | None = None,
    provider: str | None = None,
) -> turns.TurnResult:
    """Run one turn of the caller's session to its end; every open tab watches it happen.

    Steps: check the session is the caller's; run the turn (runtime.turns: SessionBusy when
    another turn holds the session past BUSY_GRACE_SEC, TooManyTurns past
    MAX_TURNS_PER_USER) with its events going to the session's group as they happen, and to
    `on_event` too when given. `provider` overrides the session's model for this turn.
    Synchronous callers (the HTTP API, manage.py chat) do the turn's store work in their own
    thread, on their own database connection.
    """
    _owned_session(session_id=session_id, owner_id=owner_id)
    return turns.turn_run(
        session_id=session_id,
        text=text,
        owner_id=owner_id,
        on_event=_turn_listener(session_id, on_event),
        provider=provider,
    )


async def turn_send_async(*, session_id: str, owner_id: int | None, text: str) -> turns.TurnResult:
    """`turn_send` for the event loop (the WebSocket): the turn runs on the caller's loop, its
    model call holds no thread, its store work and blocking tools go through bounded pools."""
    await in_pool("store", _owned_session, session_id=session_id, owner_id=owner_id)
    return await turns.turn_run_async(
        session_id=session_id,
        text=text,
        owner_id=owner_id,
        on_event=turn_event_broadcaster(session_id),
    )


def turn_abort(*, session_id: str, owner_id: int | None) -> bool:
    """Stop the running turn of the caller's session, whichever process runs it; False when
    none runs. Tabs learn of it from the turn's `agent_end` with status "aborted"."""
    _owned_session(session_id=session_id, owner_id=owner_id)
    return turns.turn_abort(session_id=session_id)


async def turn_abort_async(*, session_id: str, owner_id: int | None) -> bool:
    """`turn_abort` for the event loop. The check goes through the small control pool, like
    the lease mark: an abort never queues behind turns' work."""
    await in_pool("control", _owned_session, session_id=session_id, owner_id=owner_id)
    # The live bus reaches a turn on another worker at once; the lease mark (through the
    # small control pool) within a watch interval, with or without Redis.
    here_or_marked, elsewhere = await asyncio.gather(
        turns.turn_abort_async(session_id=session_id), live.abort_elsewhere(session_id=session_id)
    )
    return here_or_marked or elsewhere


def session_compact(*, session_id: str, owner_id: OwnerId) -> EntryRecord:
    """Summarize the older turns of the caller's session; every open tab gets the entry.

    Steps: check the session; append the `compaction` entry (sessions_app.compaction, which
    asks the model before it writes anything); once that is committed, send the entry to the
    session's group. Raises NothingToCompact when fewer than two turns are in the context.
    """
    _owned_session(session_id=session_id, owner_id=owner_id)
    try:
        entry = compaction.session_compact(session_id=session_id)
    except ValueError as error:
        raise NothingToCompact(str(error)) from error
    session_broadcast_on_commit(
        session_id=session_id, event={"type": "entry", "entry": selectors.entry_to_api(entry)}
    )
    return entry


def session_cost(*, session_id: str, owner_id: int | None) -> dict[str, Any]:
    """Tokens and estimated USD per model of the caller's session (runtime.cost)."""
    _owned_session(session_id=session_id, owner_id=owner_id)
    return cost.session_cost(session_id=session_id)
