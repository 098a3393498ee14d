"""The agent turn: one user request and everything the loop does for it (DESIGN §5).

However a turn ends, every tool call in it has a result and a `turn_end` closes it; a turn
cut short by a dead process is closed by `session_repair` on the next use of the session.
Each step is committed as it completes; model calls and tools run with no row lock held
(the lease is a field in the session row, not a held lock).
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.conf import settings
from django.db import connections, transaction

from sessions_app.ids import group_name, validate_session_id
from sessions_app.runtime.history import (
    CRASH_RESULT_TEXT,
    CRASH_TURN_ERROR,
    HistoryInvalid,
    open_turn_id,
    repair_entries,
)
from sessions_app.runtime.lease import SessionBusy, lease_acquire, lease_request_abort
from sessions_app.runtime.prompts import default_system_prompt
from sessions_app.runtime.providers import Provider, ProviderError, provider_for
from sessions_app.runtime.tools import TOOLS, Tool, ToolContext, tool_run
from sessions_app.signals import turn_finished
from sessions_app.store import EntryRecord, NewEntry, SessionMeta, SessionNotFound, get_store

__all__ = ["SessionBusy", "TurnResult", "session_repair", "turn_abort", "turn_run"]

logger = logging.getLogger(__name__)

SIGNAL_SENDER = "sessions_app.runtime"
MAX_PARALLEL_TOOLS = 8
NOT_RUN_ABORTED = "not run: the user stopped the turn"
NOT_RUN_FAILED = "not run: the turn failed before this tool ran ({error})"

# Running turns of this process: an abort from here reaches them without any round trip.
_running_lock = threading.Lock()
_running: dict[str, threading.Event] = {}


@dataclass
class TurnResult:
    turn_id: str
    status: str  # completed | aborted | max_turns | error | interrupted
    entries: list[EntryRecord] = field(default_factory=list)
    error: str = ""


TITLE_CHARS = 60


def title_from_message(text: str) -> str:
    """The first line of a message, whitespace collapsed, cut at a word near TITLE_CHARS."""
    line = " ".join(text.strip().splitlines()[0].split()) if text.strip() else ""
    if len(line) <= TITLE_CHARS:
        return line
    cut = line[:TITLE_CHARS].rsplit(" ", 1)[0] or line[:TITLE_CHARS]
    return cut.rstrip(" ,.;:") + "…"


def _emit(on_event: Callable[[dict], None] | None, event: dict) -> None:
    if on_event is None:
        return
    try:
        on_event(event)
    except Exception:  # noqa: BLE001 - a listener that went away must not break the turn
        logger.exception("turn event listener failed on %s", event.get("type"))


def _resolve(provider: Provider | str | None) -> Provider:
    if provider is None or isinstance(provider, str):
        return provider_for(provider)
    return provider


def _meta(session_id: str) -> SessionMeta:
    meta = get_store().get_meta(validate_session_id(session_id))
    if meta is None:
        raise SessionNotFound(session_id)
    return meta


def _close_turn(
    *,
    session_id: str,
    incarnation: str,
    owner_id: int | None,
    turn_id: str,
    history: list[EntryRecord],
    turn_entries: list[EntryRecord],
    status: str,
    error: str,
    unanswered_text: str,
) -> list[EntryRecord]:
    """Answer every call still waiting with an error result, then store the turn_end.

    One append, and turn_finished is sent in the same transaction: a receiver that fails
    rolls the turn_end back (the turn is then closed by repair on next use).
    """
    # The same closing as a crash repair, with this turn's own status and texts.
    closing = repair_entries(history, result_text=unanswered_text, turn_error=error, status=status)
    with transaction.atomic():
        records = get_store().append(session_id, closing, incarnation=incarnation)
        turn_finished.send(
            sender=SIGNAL_SENDER,
            session_id=session_id,
            owner_id=owner_id,
            turn_id=turn_id,
            status=status,
            entries=[*turn_entries, *records],
        )
    return records


def _repair(meta: SessionMeta, owner_id: int | None) -> list[EntryRecord]:
    """Close a turn left open by a dead process; the caller holds the lease."""
    history = get_store().get_messages(meta.id)
    turn_id = open_turn_id(history)
    if turn_id is None:
        # Legacy history without turn markers: only results can be missing, no turn to close.
        repairs = repair_entries(history)
        return get_store().append(meta.id, repairs, incarnation=meta.incarnation) if repairs else []
    start = max(i for i, entry in enumerate(history) if entry.kind == "turn_start")
    logger.warning("repairing interrupted turn %s of session %s", turn_id, meta.id)
    return _close_turn(
        session_id=meta.id,
        incarnation=meta.incarnation,
        owner_id=owner_id,
        turn_id=turn_id,
        history=history,
        turn_entries=history[start:],
        status="interrupted",
        error=CRASH_TURN_ERROR,
        unanswered_text=CRASH_RESULT_TEXT,
    )


def session_repair(*, session_id: str) -> list[EntryRecord]:
    """Close the session's last turn if the process running it died (DESIGN §5.4).

    Steps: take the turn lease (so two repairers, or a repairer and a live turn, never both
    write); append error results for calls without one and a turn_end `interrupted`; release.
    Returns the entries added — none when the history was already closed (idempotent).
    """
    _meta(session_id)
    lease = lease_acquire(session_id=session_id, wait_sec=settings.BUSY_GRACE_SEC)
    try:
        meta = _meta(session_id)  # as of now, under the lease
        return _repair(meta, meta.owner_id)
    finally:
        lease.release()


def _run_calls(
    calls: list[dict], *, meta: SessionMeta, abort: threading.Event, tools: dict[str, Tool]
) -> list[tuple[str, bool]]:
    """Run a step's calls — concurrently when there are several — results in call order."""
    context = ToolContext(
        session_id=meta.id,
        abort=abort,
        fenced=partial(get_store().fenced, meta.id, meta.incarnation),
    )
    if len(calls) == 1:
        return [tool_run(call=calls[0], context=context, tools=tools)]

    def run(call):
        try:
            return tool_run(call=call, context=context, tools=tools)
        finally:
            connections.close_all()  # the worker thread's own connections

    with ThreadPoolExecutor(max_workers=min(MAX_PARALLEL_TOOLS, len(calls))) as pool:
        return list(pool.map(run, calls))


def turn_run(
    *,
    session_id: str,
    text: str,
    owner_id: int | None = None,
    on_event: Callable[[dict], None] | None = None,
    provider: Provider | str | None = None,
) -> TurnResult:
    """Run one turn to its end and return what it stored.

    Steps: take the session's turn lease (waiting up to BUSY_GRACE_SEC, else SessionBusy);
    repair a turn a dead process left open; store turn_start and the user message; then
    until the model answers without tool calls or MAX_STEPS model calls were made: call the
    model (streaming `delta` events), store its message, run its calls and store one result
    per call in call order; finally close the turn (error results for any call still
    waiting, turn_end with the status, turn_finished) and release the lease.
    """
    if not text or not text.strip():
        raise ValueError("a turn needs a non-empty message")
    _meta(session_id)
    provider = _resolve(provider)
    lease = lease_acquire(session_id=session_id, wait_sec=settings.BUSY_GRACE_SEC)
    abort = threading.Event()
    with _running_lock:
        _running[session_id] = abort
    try:
        lease.watch(on_abort=abort.set)
        # Read under the lease: the session may have been deleted, even re-created by someone
        # else, while this request waited. The turn is fenced to what it finds now.
        meta = _meta(session_id)
        if owner_id is None:
            owner_id = meta.owner_id
        elif meta.owner_id != owner_id:
            raise SessionNotFound(session_id)
        _repair(meta, owner_id)
        return _loop(meta, owner_id, text, provider, abort, on_event)
    finally:
        with _running_lock:
            if _running.get(session_id) is abort:
                del _running[session_id]
        lease.release()


def _loop(meta, owner_id, text, provider, abort, on_event) -> TurnResult:
    store = get_store()
    session_id = meta.id
    turn_id = f"turn_{uuid.uuid4().hex}"
    system_prompt = default_system_prompt(meta.agent)
    tools = dict(TOOLS)
    specs = [tool.spec() for tool in tools.values()]
    history = store.get_messages(session_id)
    _emit(on_event, {"type": "agent_start", "turn_id": turn_id})
    incarnation = meta.incarnation
    turn_entries = store.append(
        session_id,
        [
            NewEntry(
                kind="turn_start",
                turn_id=turn_id,
                data={
                    "model": provider.label,
                    "system_prompt": system_prompt,
                    "tools": list(tools),
                },
            ),
            NewEntry(role="user", content=text, turn_id=turn_id),
        ],
        incarnation=incarnation,
    )

    if not meta.title:
        # A conversation is named after its first request, so the sessions list reads as
        # what was asked rather than as ids.
        store.set_title(session_id, title_from_message(text), incarnation=incarnation)

    def stored(records: list[EntryRecord]) -> None:
        history.extend(records)
        turn_entries.extend(records)
        for record in records:
            _emit(on_event, {"type": "entry", "entry": record})

    history.extend(turn_entries)
    for record in turn_entries:
        _emit(on_event, {"type": "entry", "entry": record})

    status = "max_turns"
    error = f"the turn reached its limit of {settings.MAX_STEPS} model calls"
    try:
        for _step in range(settings.MAX_STEPS):
            if abort.is_set():
                status, error = "aborted", ""
                break
            try:
                reply = provider.complete(
                    entries=history,
                    system_prompt=system_prompt,
                    tools=specs,
                    on_delta=lambda piece: _emit(
                        on_event, {"type": "delta", "turn_id": turn_id, "text": piece}
                    ),
                    abort=abort,
                )
            except (ProviderError, HistoryInvalid) as failure:
                status, error = "error", str(failure)
                break
            calls = [] if reply.stopped else reply.tool_calls
            if reply.text.strip() or calls:
                stored(
                    store.append(
                        session_id,
                        [
                            NewEntry(
                                role="assistant",
                                content=reply.text,
                                tool_calls=calls or None,
                                model=reply.model or provider.model,
                                usage=reply.usage,
                                turn_id=turn_id,
                            )
                        ],
                        incarnation=incarnation,
                    )
                )
            if reply.stopped:
                status, error = "aborted", ""
                break
            if not calls:
                status, error = "completed", ""
                break
            results = _run_calls(calls, meta=meta, abort=abort, tools=tools)
            stored(
                store.append(
                    session_id,
                    [
                        NewEntry(
                            role="tool",
                            tool_call_id=call["id"],
                            name=call["name"],
                            content=result_text,
                            is_error=is_error,
                            turn_id=turn_id,
                        )
                        for call, (result_text, is_error) in zip(calls, results, strict=True)
                    ],
                    incarnation=incarnation,
                )
            )
            if abort.is_set():
                status, error = "aborted", ""
                break
    except SessionNotFound:
        raise  # deleted mid-turn: there is nothing left to close
    except Exception as failure:  # noqa: BLE001 - any failure still closes the turn
        logger.exception("turn %s of session %s failed", turn_id, session_id)
        status, error = "error", f"internal error: {failure}"
    unanswered = NOT_RUN_ABORTED if status == "aborted" else NOT_RUN_FAILED.format(error=error)
    stored(
        _close_turn(
            session_id=session_id,
            incarnation=incarnation,
            owner_id=owner_id,
            turn_id=turn_id,
            history=history,
            turn_entries=list(turn_entries),
            status=status,
            error=error,
            unanswered_text=unanswered,
        )
    )
    _emit(on_event, {"type": "agent_end", "turn_id": turn_id, "status": status})
    return TurnResult(turn_id=turn_id, status=status, entries=turn_entries, error=error)


def turn_abort(*, session_id: str) -> bool:
    """Stop the session's running turn, whichever process runs it; False when none runs.

    The turn's own process sees the abort at once (a threading.Event), another process
    within a watch interval (a mark on the lease). The session's channel-layer group gets
    {"type": "turn.abort"} so connected clients learn about it too.
    """
    validate_session_id(session_id)
    with _running_lock:
        local = _running.get(session_id)
    if local is not None:
        local.set()
    remote = lease_request_abort(session_id=session_id)
    layer = get_channel_layer()
    if layer is not None:
        try:
            async_to_sync(layer.group_send)(group_name(session_id), {"type": "turn.abort"})
        except Exception:  # noqa: BLE001 - the lease mark already carries the abort
            logger.exception("could not announce the abort of %s", session_id)
    return local is not None or remote
