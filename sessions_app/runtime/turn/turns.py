"""The agent turn: one user request and everything the loop does for it (docs/design.md §5).

However a turn ends, every tool call in it has a result and a `turn_end` closes it; a turn
cut short by a dead process is closed by `session_repair` on the next use of the session.
Each step is committed as it completes; model calls and tools run with no row lock held
(the turn lease holds no database lock, see runtime.turn.lease).
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from functools import partial

from django.conf import settings
from django.db import DatabaseError, transaction

from jarvis_site.shared import metrics
from jarvis_site.shared.errors import Code, DomainError
from jarvis_site.shared.log_context import log_context, log_context_set
from jarvis_site.shared.outages import database_away
from sessions_app.core.ids import unique_token, validate_session_id
from sessions_app.core.signals import turn_finished
from sessions_app.runtime.context.history import (
    CRASH_RESULT_TEXT,
    CRASH_TURN_ERROR,
    HistoryInvalid,
    open_turn_id,
    repair_entries,
)
from sessions_app.runtime.loop.drain import turn_admitted
from sessions_app.runtime.loop.eager import AT_ONCE
from sessions_app.runtime.loop.event_pump import EventPump
from sessions_app.runtime.loop.executors import (
    in_pool,
    in_pool_first,
    in_sync_caller,
    run_for_sync_caller,
)
from sessions_app.runtime.mcp.offer import mcp_ready
from sessions_app.runtime.providers import Provider, ProviderError, provider_for
from sessions_app.runtime.tools.base import Tool, ToolContext, ToolOutput, TurnAbort
from sessions_app.runtime.tools.registry import tool_output
from sessions_app.runtime.turn.agents import (
    AgentDefinition,
    agent_get,
    agent_tools,
    model_for_session,
)
from sessions_app.runtime.turn.approvals import ApprovalGate, approvals_interrupted
from sessions_app.runtime.turn.context_fit import ContextFit
from sessions_app.runtime.turn.lease import (
    SessionBusy,
    TurnLease,
    lease_acquire,
    lease_request_abort,
)
from sessions_app.runtime.turn.memory_context import system_prompt_for
from sessions_app.runtime.turn.outage import RETRY_SEC as OUTAGE_RETRY_SEC
from sessions_app.runtime.turn.outage import DatabaseAway, LeaseLost, WriteHold
from sessions_app.runtime.turn.queue import (
    queue_take,
    queue_turn_ended,
    queue_waiting,
    steers_take,
    steers_to_front,
    steers_waiting,
)
from sessions_app.runtime.turn.timings import Stopwatch, tool_outcome
from sessions_app.runtime.turn.titles import first_answer, title_by_model, title_model
from sessions_app.store import EntryRecord, NewEntry, SessionMeta, SessionNotFound, get_store
from sessions_app.store.request_headers import header_digest, header_save

__all__ = [
    "QueuedPromptGone",
    "SessionBusy",
    "TooManyTurns",
    "TurnResult",
    "session_repair",
    "turn_abort",
    "turn_abort_async",
    "turn_abort_local",
    "turn_run",
    "turn_run_async",
]

logger = logging.getLogger(__name__)

SIGNAL_SENDER = "sessions_app.runtime"
NOT_RUN_ABORTED = "not run: the user stopped the turn"
NOT_RUN_FAILED = "not run: the turn failed before this tool ran ({error})"

# Running turns of this process: an abort from here reaches them without any round trip.
_running_lock = threading.Lock()
_running: dict[str, TurnAbort] = {}
_running_owner: dict[str, int] = {}  # whose turn each is: an abort checks it without a query
# Turns of this process between their ownership check and their lease (the first of a session
# only), with their owner: a Stop pressed while a turn starts stops it before its model call.
_starting: dict[str, tuple[TurnAbort, int | None]] = {}
_turns_of_user: dict[int, int] = {}


@dataclass
class TurnResult:
    turn_id: str
    status: str  # completed | aborted | max_turns | error | interrupted
    entries: list[EntryRecord] = field(default_factory=list)
    error: str = ""
    code: str = ""  # the error table's code of a failed turn that has one (context_too_long)


TITLE_CHARS = 60


def title_from_message(text: str) -> str:
    """The first line of a message, whitespace collapsed, cut at a word near TITLE_CHARS."""
    line = " ".join(text.strip().splitlines()[0].split()) if text.strip() else ""
    if len(line) <= TITLE_CHARS:
        return line
    cut = line[:TITLE_CHARS].rsplit(" ", 1)[0] or line[:TITLE_CHARS]
    return cut.rstrip(" ,.;:") + "…"


class TooManyTurns(DomainError):
    """The user already runs MAX_TURNS_PER_USER turns (429 / error `too_many_turns`)."""

    code = Code.TOO_MANY_TURNS

    def __init__(self, limit: int):
        super().__init__(f"you already have {limit} requests running; wait for one to finish")


class QueuedPromptGone(LookupError):
    """The queued prompt a turn was to run was cancelled before the turn stored it."""


def _resolve(provider: Provider | str | None) -> Provider:
    if provider is None or isinstance(provider, str):
        return provider_for(provider)
    return provider


def _pool_for(abort: TurnAbort) -> str:
    """The pool a turn's store work goes to: once the turn is aborted, its last writes (what
    the model had said, the closing) go through the `control` pool, so that Stop is not
    answered after the queue of every other turn's writes (docs/design.md §12). A
    synchronous caller's work stays in its own thread, on its connection."""
    return "control" if abort.is_set() and not in_sync_caller() else "store"


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
    unanswered_texts: dict[str, str] | None = None,
    code: str = "",
    answer: list[NewEntry] | None = None,
) -> list[EntryRecord]:
    """Answer every call still waiting with an error result, then store the turn_end.

    One append, and turn_finished is sent in the same transaction: a receiver that fails
    rolls the turn_end back (the turn is then closed by repair on next use). `answer`, the
    turn's last model message, is stored first in the same transaction: one commit and one
    pool call less for every turn that ends with an answer (or with the part of one a
    Stop cut short).
    """
    with transaction.atomic():
        records = []
        if answer:
            records = get_store().append(session_id, answer, incarnation=incarnation)
            history = [*history, *records]
        # The same closing as a crash repair, with this turn's own status and texts.
        closing = repair_entries(
            history,
            result_text=unanswered_text,
            turn_error=error,
            status=status,
            result_texts=unanswered_texts,
            code=code,
        )
        records += get_store().append(session_id, closing, incarnation=incarnation)
        # A steer sent too late for this turn is the next thing to run (docs/design.md §18).
        steers_to_front(session_id=session_id, incarnation=incarnation)
        turn_finished.send(
            sender=SIGNAL_SENDER,
            session_id=session_id,
            owner_id=owner_id,
            turn_id=turn_id,
            status=status,
            entries=[*turn_entries, *records],
        )
    return records


def _repair(
    meta: SessionMeta, owner_id: int | None, history: list[EntryRecord]
) -> list[EntryRecord]:
    """Close a turn left open by a dead process in `history` (the session's whole history);
    the caller holds the lease. Returns the entries added."""
    turn_id = open_turn_id(history)
    if turn_id is None:
        # Legacy history without turn markers: only results can be missing, no turn to close.
        repairs = repair_entries(history)
        if not repairs:
            return []
        return get_store().append(meta.id, repairs, incarnation=meta.incarnation)
    start = max(i for i, entry in enumerate(history) if entry.kind == "turn_start")
    logger.warning("repairing interrupted turn %s of session %s", turn_id, meta.id)
    metrics.REPAIRS.inc()
    # One transaction: the approval rows close together with the results that report them.
    with transaction.atomic():
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
            # A call that waited for the person's approval never ran: its result says so.
            unanswered_texts=approvals_interrupted(session_id=meta.id),
        )


def session_repair(*, session_id: str) -> list[EntryRecord]:
    """Close the session's last turn if the process running it died (docs/design.md §5.4).

    Steps: take the turn lease (so two repairers, or a repairer and a live turn, never both
    write); append error results for calls without one and a turn_end `interrupted`; release.
    Returns the entries added — none when the history was already closed (idempotent).
    """
    _meta(session_id)
    lease = lease_acquire(session_id=session_id, wait_sec=settings.BUSY_GRACE_SEC)
    try:
        meta = _meta(session_id)  # as of now, under the lease
        return _repair(meta, meta.owner_id, get_store().get_messages(session_id))
    finally:
        lease.release()


def _begin(
    *,
    session_id: str,
    agent: str,
    owner_id: int | None,
    turn_id: str,
    text: str,
    start_data: dict,
    header: dict,
    queue_id: str | None = None,
    attachments: list[dict] | None = None,
    meta_now: SessionMeta | None = None,
) -> tuple[SessionMeta, int | None, list[EntryRecord], list[EntryRecord]]:
    """The turn's first store work, in one pool call: read the session under the lease,
    repair what a dead process left open, store the request header (once per distinct
    value), turn_start and the user's message, and name the conversation after its first
    request. A queued prompt `queue_id` leaves its row in the same transaction as its
    message is stored (QueuedPromptGone when it was cancelled). `meta_now`: the session as
    the lease's taking returned it, if it did. Returns (meta, owner, history, turn entries)."""
    store = get_store()
    # Read under the lease: the session may have been deleted, even re-created by someone
    # else, while this request waited. The turn is fenced to what it finds now.
    meta = meta_now if meta_now is not None else _meta(session_id)
    if owner_id is None:
        owner_id = meta.owner_id
    elif meta.owner_id != owner_id:
        raise SessionNotFound(session_id)
    if meta.agent != agent:
        raise SessionNotFound(session_id)  # re-created for another agent: not the one asked
    # From the latest compaction on: a turn's start does not grow with the history.
    history = store.get_context_entries(session_id)
    history.extend(_repair(meta, owner_id, history))
    header_save(header, start_data["header"])
    # A queued prompt leaves its row exactly when it becomes the turn's message: a crash
    # before this keeps it queued, after it the turn is in the history (repaired if cut).
    # A prompt sent directly has no row: its append is its own transaction.
    with transaction.atomic() if queue_id is not None else nullcontext():
        if queue_id is not None and not queue_take(
            session_id=session_id, incarnation=meta.incarnation, queue_id=queue_id
        ):
            raise QueuedPromptGone(queue_id)
        turn_entries = store.append(
            session_id,
            [
                NewEntry(kind="turn_start", turn_id=turn_id, data=start_data),
                NewEntry(
                    role="user",
                    content=text,
                    turn_id=turn_id,
                    # Ids and names of the files (docs/design.md §23), never their bytes.
                    data={"attachments": attachments} if attachments else None,
                ),
            ],
            incarnation=meta.incarnation,
        )
    if not meta.title:
        # A conversation is named after its first request, so the sessions list reads as
        # what was asked rather than as ids. Not in the append's transaction: it would hold
        # the session row's lock for two more round trips.
        store.set_title(session_id, title_from_message(text), incarnation=meta.incarnation)
    return meta, owner_id, history, turn_entries


@contextmanager
def _user_slot(owner_id: int | None):
    """Count the user's turns in this process; refuse past MAX_TURNS_PER_USER. Yields a
    `release` the turn calls as soon as its last event is queued (idempotent; leaving the
    block releases too): a person who sends a prompt the moment `agent_end` arrives must
    not be refused for the turn that just told them it ended."""
    if owner_id is None:
        yield lambda: None
        return
    with _running_lock:
        if _turns_of_user.get(owner_id, 0) >= settings.MAX_TURNS_PER_USER:
            raise TooManyTurns(settings.MAX_TURNS_PER_USER)
        _turns_of_user[owner_id] = _turns_of_user.get(owner_id, 0) + 1
    held = True

    def release() -> None:
        nonlocal held
        with _running_lock:
            if not held:
                return
            held = False
            _turns_of_user[owner_id] -= 1
            if not _turns_of_user[owner_id]:
                del _turns_of_user[owner_id]

    try:
        yield release
    finally:
        release()


def turn_run(**kwargs) -> TurnResult:
    """`turn_run_async` for synchronous callers (the HTTP API, commands, tests); its store
    work runs in the caller's thread, on the caller's database connection."""
    return run_for_sync_caller(turn_run_async, **kwargs)


async def turn_run_async(
    *,
    session_id: str,
    text: str,
    owner_id: int | None = None,
    on_event: Callable[[dict], object] | None = None,
    provider: Provider | str | None = None,
    queue_id: str | None = None,
    wait_sec: float | None = None,
    meta: SessionMeta | None = None,
    attachments: list[dict] | None = None,
) -> TurnResult:
    """Run one turn to its end and return what it stored.

    Steps: take the session's turn lease (waiting up to BUSY_GRACE_SEC, else SessionBusy);
    repair a turn a dead process left open; store turn_start and the user message; then
    until the model answers without tool calls or MAX_STEPS model calls were made: call the
    model (streaming `delta` events), store its message, run its calls and store one result
    per call in call order; finally close the turn (error results for any call still
    waiting, turn_end with the status, turn_finished) and release the lease.

    Before each model call, steers sent to the session since the last step are stored as
    user messages of this turn (`data.steer`), so the model's next call sees them. After the
    lease is released, prompts queued meanwhile are handed to the queue runner.

    `queue_id` names the queued prompt this turn runs (taken with the turn's first write);
    `wait_sec` overrides BUSY_GRACE_SEC (the queue runner does not wait: the lease holder
    runs the queue itself when its turn ends). `meta` is the session as the caller's
    ownership check read it, so the turn does not read it again before its lease; under the
    lease it is read once more, since it may have changed while the turn waited.
    `attachments`: the files the message carries (`data.attachments`, checked by the caller:
    services.files.attachments_for_prompt).

    The model call holds no thread; store writes go through the bounded store pool and
    blocking tools through the tool pool (runtime.loop.executors).
    """
    if not text or not text.strip():
        raise ValueError("a turn needs a non-empty message")
    # A draining worker refuses here, before anything is read or stored.
    with (
        turn_admitted(session_id),
        log_context(session_id=session_id, user_id=owner_id, turn_id=None),
    ):
        return await _run(
            session_id, text, owner_id, on_event, provider, queue_id, wait_sec, meta, attachments
        )


def _open(
    session_id: str, owner_id: int | None, meta: SessionMeta | None
) -> tuple[SessionMeta, TurnLease]:
    """The turn's first pool call: the session (SessionNotFound when it is missing or, with
    `owner_id`, someone else's) and its lease, not yet acquired. One hop instead of three:
    under a burst every hop of a turn's start waits behind the other turns' work. `meta`, when
    the caller's ownership check read it already, is not read again (it is read once more
    under the lease, in `_begin`)."""
    if meta is None:
        meta = _meta(session_id)
    return meta, _lease_of_owned(meta, session_id, owner_id)


def _lease_of_owned(meta: SessionMeta | None, session_id: str, owner_id: int | None) -> TurnLease:
    """The session's lease, not yet acquired. With `owner_id`, of that person's session only:
    SessionNotFound now when `meta` says it is someone else's, else when the lease is taken."""
    if meta is not None and owner_id is not None and meta.owner_id != owner_id:
        raise SessionNotFound(session_id)
    return TurnLease.for_session(session_id, owner_id)


async def _run(
    session_id, text, owner_id, on_event, provider, queue_id, wait_sec, meta, attachments=None
) -> TurnResult:
    # A turn's start goes ahead of the writes of turns already streaming (§26).
    if meta is not None and meta.id != session_id:
        meta = None
    if TurnLease.made_without_query() and (meta is not None or owner_id is not None):
        # Nothing to read before the lease: the caller read the session, or the lease's
        # taking checks the owner and reads it (one pool call fewer per turn, §26).
        lease = _lease_of_owned(meta, session_id, owner_id)
    else:
        meta, lease = await in_pool_first("store", _open, session_id, owner_id, meta)
    owner = owner_id if owner_id is not None else meta.owner_id
    log_context_set(user_id=owner)
    abort = TurnAbort()
    with _running_lock:
        _starting.setdefault(session_id, (abort, owner))
    try:
        with _user_slot(owner) as release_user_slot:
            pump = EventPump(on_event)

            def held() -> None:
                # The lease is taken and the turn's first writes are stored: from now on a Stop
                # of this worker finds the turn, and the keeper renews its lease.
                with _running_lock:
                    _running[session_id] = abort
                    _running_owner[session_id] = owner
                    _stop_starting(session_id, abort)
                lease.watch(on_abort=abort.set)

            late: list = []  # the closing to write once the database is back (§32)
            try:
                result, meta = await _loop(
                    session_id,
                    meta,
                    owner_id,
                    text,
                    provider,
                    abort,
                    pump,
                    queue_id,
                    attachments,
                    take=partial(
                        lease.acquire_async,
                        settings.BUSY_GRACE_SEC if wait_sec is None else wait_sec,
                        abort=abort,
                    ),
                    held=held,
                    still_ours=lease.backend.renew,
                    late=late,
                )
            finally:
                # Before the first await: the pump cannot deliver `agent_end` before this.
                release_user_slot()
                with _running_lock:
                    if _running.get(session_id) is abort:
                        del _running[session_id]
                        del _running_owner[session_id]
                await pump.close()
                if lease.held:
                    await _closed_and_released(lease, late)
        if (
            not meta.title
            and meta.spawned_by is None
            and result.status == "completed"
            and title_model() is not None
        ):
            # The first answer: the model names the conversation, after the lease is released
            # (the next turn need not wait for a title). A sub-agent's session is in nobody's
            # list: no title is worth a call there. The call blocks for the model's answer:
            # in the tools pool, which is for blocking work, not in the store pool that
            # every turn's writes wait for.
            await in_pool(
                "tools",
                title_by_model,
                session_id=session_id,
                incarnation=meta.incarnation,
                first_words=title_from_message(text),
                prompt=text,
                answer=first_answer(result.entries),
            )
        return result
    finally:
        with _running_lock:
            _stop_starting(session_id, abort)


def _stop_starting(session_id: str, abort: TurnAbort) -> None:
    """Under _running_lock: the turn is no longer starting (it runs, or it ended)."""
    if _starting.get(session_id, (None, None))[0] is abort:
        del _starting[session_id]


_late_closings: set[asyncio.Task] = set()


async def _closed_and_released(lease: TurnLease, late: list) -> None:
    """Release the turn's lease and run what was queued behind it — at once, or, when the
    database is away (the turn's closing waits for it, or the release meets the outage), in
    a task that does it once the database is back (§32): the turn has ended for everyone."""
    if not late:
        try:
            if await in_pool("store", _release, lease):
                queue_turn_ended(lease.session_id)
            return
        except Exception as error:
            if not database_away(error) or in_sync_caller():
                raise
    task = asyncio.ensure_future(_close_late(lease, late))
    _late_closings.add(task)
    task.add_done_callback(_late_closings.discard)


async def _close_late(lease: TurnLease, late: list) -> None:
    try:
        for write in late:
            await write()
        while True:
            try:
                waiting = await in_pool("store", _release, lease)
                break
            except Exception as error:
                if not database_away(error):
                    raise
                await asyncio.sleep(OUTAGE_RETRY_SEC)
        if waiting:
            queue_turn_ended(lease.session_id)
    except Exception:
        # The lease lapses; the session's next turn closes this one as a crash would.
        logger.exception("turn of %s could not be closed after the outage", lease.session_id)
        lease.unwatch()


def _release(lease: TurnLease) -> bool:
    """Let go of the turn's lease, then say whether prompts wait for the session (one pool
    call). After the release: a prompt queued while the lease was held is seen here, or its
    sender found the lease free and runs it itself."""
    lease.release()
    try:
        return queue_waiting(lease.session_id)
    except DatabaseError:
        # The turn's own outcome stands; the recovery sweep runs what waits.
        logger.exception("looking for prompts queued behind turn of %s failed", lease.session_id)
        return False


@dataclass(frozen=True)
class _Plan:
    """What a turn's requests are made of, from the session as the turn found it."""

    agent: AgentDefinition
    tools: dict[str, Tool]
    specs: list
    thinking: str
    provider: Provider
    parameters: dict

    @classmethod
    def of(cls, meta: SessionMeta, provider: Provider | str | None) -> _Plan:
        """`provider` overrides the session's model (its own, else its agent's)."""
        agent = agent_get(meta.agent)
        tools = agent_tools(agent)
        provider = _resolve(
            provider
            if provider is not None
            else model_for_session(agent=meta.agent, model=meta.model)
        )
        return cls(
            agent=agent,
            tools=tools,
            specs=[tool.spec() for tool in tools.values()],
            thinking=meta.thinking,
            provider=provider,
            parameters=provider.parameters_for(meta.thinking),
        )


async def _loop(
    session_id,
    meta,
    owner_id,
    text,
    provider,
    abort,
    pump,
    queue_id,
    attachments,
    *,
    take,
    held,
    still_ours,
    late: list,
) -> tuple[TurnResult, SessionMeta]:
    """The turn from its lease on: `take(then)` takes the lease and runs `then` (the system
    prompt and the first writes) in the same pool call; `held()` registers the running turn.
    `meta`: the session as the caller read it, or None when the lease's taking reads it (the
    turn's plan is then made in that pool call). Returns the result and the session as the
    turn found it under its lease."""
    turn_id = f"turn_{unique_token(128)}"  # uuid4's shape, without its system call
    log_context_set(turn_id=turn_id)
    started = time.monotonic()
    waited = 0.0  # on the model and on tools: the part of the turn that is not ours
    # The MCP servers' tools are listed (once, on the MCP lane) before the plan offers them.
    await mcp_ready()
    planned = None if meta is None else _Plan.of(meta, provider)

    def prompt_and_begin(meta_now: SessionMeta | None):
        # One pool call for the system prompt (memory's reads) and the turn's first writes.
        if planned is None and meta_now is None:
            meta_now = _meta(session_id)  # the store's lease did not return it: read it now
        plan = planned or _Plan.of(meta_now, provider)
        system_prompt = system_prompt_for(
            agent_prompt=plan.agent.system_prompt, meta=meta if meta is not None else meta_now
        )
        # What every request of the turn shares; stored once per distinct value and named
        # by turn_start, so that each request can be rebuilt (docs/design.md §20).
        header = {
            "system": system_prompt,
            "tools": [spec.as_dict() for spec in plan.specs],
            "parameters": plan.parameters,
            "thinking": plan.thinking,
        }
        begun = _begin(
            session_id=session_id,
            agent=plan.agent.name,
            owner_id=owner_id,
            turn_id=turn_id,
            text=text,
            queue_id=queue_id,
            attachments=attachments,
            start_data={
                "model": plan.provider.label,
                "agent": plan.agent.name,
                "thinking": plan.thinking,
                "header": header_digest(header),
            },
            header=header,
            meta_now=meta_now,
        )
        # The first step's boundary: steers sent while the turn started are its messages.
        begun[3].extend(
            _steers_store(session_id=session_id, incarnation=begun[0].incarnation, turn_id=turn_id)
        )
        return system_prompt, plan, begun

    system_prompt, plan, (meta, owner_id, history, turn_entries) = await take(prompt_and_begin)
    held()
    # The turn's writes wait through a database outage (runtime.turn.outage, §32); what a
    # write could not store before the hold ran out is stored with the turn's closing.
    hold = WriteHold(turn_id=turn_id, still_ours=still_ours)
    unstored: list[NewEntry] = []
    provider, tools = plan.provider, plan.tools
    incarnation = meta.incarnation
    store = get_store()
    # After the first write: a queued prompt cancelled at the last moment never started.
    pump.put(
        {"type": "agent_start", "turn_id": turn_id}
        | ({"queue_id": queue_id} if queue_id is not None else {})
    )

    def stored(records: list[EntryRecord]) -> None:
        history.extend(records)
        for record in records:
            pump.put({"type": "entry", "entry": record})

    async def append(entries: list[NewEntry]) -> None:
        try:
            records = await hold.write(
                lambda: in_pool(
                    _pool_for(abort), hold.guarded(store.append), session_id, entries, incarnation
                )
            )
        except DatabaseAway:
            unstored.extend(entries)
            raise
        turn_entries.extend(records)
        stored(records)

    async def append_steers() -> None:
        records = await hold.write(
            lambda: in_pool(
                "store",
                hold.guarded(_steers_store),
                session_id=session_id,
                incarnation=incarnation,
                turn_id=turn_id,
            )
        )
        turn_entries.extend(records)
        stored(records)

    def stored_by_turn(records: list[EntryRecord]) -> None:
        turn_entries.extend(records)
        stored(records)

    stored(turn_entries)
    fit = ContextFit(
        provider=provider,
        session_id=session_id,
        incarnation=incarnation,
        turn_id=turn_id,
        history=history,
        request={
            "system_prompt": system_prompt,
            "tools": plan.specs,
            "parameters": plan.parameters,
        },
        emit=pump.put,
        on_stored=stored_by_turn,
    )
    context = ToolContext(
        session_id=session_id,
        owner_id=owner_id,
        abort=abort,
        fenced=partial(store.fenced, session_id, incarnation),
        approve=ApprovalGate(
            session_id=session_id,
            turn_id=turn_id,
            abort=abort,
            announce=pump.put,
            fenced=partial(store.fenced, session_id, incarnation),
        ),
    )

    status = "max_turns"
    lease_lost = False
    error = f"the turn reached its limit of {settings.MAX_STEPS} model calls"
    answer: list[NewEntry] = []
    code = ""
    try:
        for _step in range(settings.MAX_STEPS):
            if abort.is_set():
                status, error = "aborted", ""
                break
            # The step boundary: the results of the calls under way are stored (the first
            # step's steers were taken with the turn's first writes).
            if _step:
                await append_steers()
            model_started = time.monotonic()
            model_clock = Stopwatch()
            try:
                # Compacts first when the request would not fit (docs/design.md §22).
                reply = await fit.call(
                    on_delta=lambda piece: pump.put(
                        {"type": "delta", "turn_id": turn_id, "text": piece}
                    ),
                    abort=abort,
                )
            except (ProviderError, HistoryInvalid) as failure:
                status, error = "error", str(failure)
                code = getattr(failure, "code", "")
                break
            finally:
                model_sec = time.monotonic() - model_started
                waited += model_sec
                metrics.MODEL_CALL.observe(model_sec)
            calls = [] if reply.stopped else reply.tool_calls
            model_call = model_clock.fact(finish_reason=_finish_reason(reply, calls))
            if reply.text.strip() or calls:
                message = NewEntry(
                    role="assistant",
                    content=reply.text,
                    tool_calls=calls or None,
                    model=reply.model or provider.model,
                    usage=reply.usage,
                    turn_id=turn_id,
                    data=_answer_data(model_call, reply.reasoning),
                )
                if not calls:
                    # The turn's answer, or what came of it before a Stop: stored with the
                    # turn's closing, in one commit (a Stop is answered one pool call sooner).
                    answer = [message]
                    status, error = ("aborted" if reply.stopped else "completed"), ""
                    break
                await append([message])
            if reply.stopped:
                status, error = "aborted", ""
                break
            if not calls:
                status, error = "completed", ""
                break
            # A step's calls run side by side; results are stored in call order.
            tools_started = time.monotonic()
            results = await asyncio.gather(
                *(_timed_tool_run(call=call, context=context, tools=tools) for call in calls)
            )
            waited += time.monotonic() - tools_started
            await append(
                [
                    NewEntry(
                        role="tool",
                        tool_call_id=call["id"],
                        name=call["name"],
                        content=output.text,
                        is_error=output.is_error,
                        turn_id=turn_id,
                        data={"tool": timing}
                        | ({"files": list(output.files)} if output.files else {})
                        | output.data,
                    )
                    for call, (output, timing) in zip(calls, results, strict=True)
                ]
            )
            if abort.is_set():
                status, error = "aborted", ""
                break
    except SessionNotFound:
        raise  # deleted mid-turn: there is nothing left to close
    except (DatabaseAway, LeaseLost) as failure:
        status, error, code = "error", str(failure), failure.code
        lease_lost = isinstance(failure, LeaseLost)  # the turn that took it closes this one
    except Exception as failure:  # noqa: BLE001 - any failure still closes the turn
        logger.exception("turn %s of session %s failed", turn_id, session_id)
        status, error = "error", f"internal error: {failure}"

    def closing_kwargs() -> dict:
        unanswered = NOT_RUN_ABORTED if status == "aborted" else NOT_RUN_FAILED.format(error=error)
        return {
            "session_id": session_id,
            "incarnation": incarnation,
            "owner_id": owner_id,
            "turn_id": turn_id,
            "history": history,
            "turn_entries": list(turn_entries),
            "status": status,
            "error": error,
            "unanswered_text": unanswered,
            "code": code,
            "answer": [*unstored, *answer],
        }

    # A turn started at once is closed at once too: a person's short answer, asked during a
    # burst, waited up to 0.9 s here behind the burst's starts (§26).
    close_in_pool = in_pool_first if AT_ONCE.get() else in_pool
    closing: list[EntryRecord] = []
    if not lease_lost:
        try:
            closing = await hold.write(
                lambda: close_in_pool(
                    _pool_for(abort), hold.guarded(_close_turn), **closing_kwargs()
                )
            )
        except DatabaseAway as away:
            # Every tab learns now that the turn ended; what it holds is stored once the
            # database is back (runtime.turn.outage).
            status, error, code = "error", str(away), away.code
            late_kwargs = closing_kwargs()
            late.append(
                lambda: hold.write(
                    lambda: in_pool("store", hold.guarded(_close_turn), **late_kwargs),
                    expire=False,
                )
            )
        except LeaseLost as lost:
            status, error, code = "error", str(lost), lost.code
    turn_entries.extend(closing)
    stored(closing)
    duration = time.monotonic() - started
    metrics.TURNS.labels(status=status).inc()
    metrics.TURN_DURATION.observe(duration)
    metrics.TURN_OVERHEAD.observe(max(0.0, duration - waited))
    logger.info("turn ended", extra={"status": status, "duration_ms": round(duration * 1000, 1)})
    pump.put(
        {
            "type": "agent_end",
            "turn_id": turn_id,
            "status": status,
            "last_seq": turn_entries[-1].seq,
        }
        # What went wrong, on every tab: a turn that could not store its end has no
        # `turn_end` entry to say it (§32).
        | ({"error": error, "code": code or Code.TURN_FAILED} if status == "error" else {})
    )
    return TurnResult(
        turn_id=turn_id, status=status, entries=turn_entries, error=error, code=code
    ), meta


def _answer_data(model_call: dict, reasoning: list[dict]) -> dict:
    """The assistant entry's data: its model call's timing, and the reasoning the provider
    needs back with its tool use (docs/design.md §20)."""
    data = {"model_call": model_call}
    if reasoning:
        data["reasoning"] = reasoning
    return data


def _finish_reason(reply, calls: list[dict]) -> str:
    """The provider's own reason, else what the answer shows (the offline model says none)."""
    if reply.stopped:
        return "aborted"
    return reply.finish_reason or ("tool_calls" if calls else "stop")


async def _timed_tool_run(*, call, context, tools) -> tuple[ToolOutput, dict]:
    """`tool_output` with its start, duration and outcome (docs/design.md §20)."""
    clock = Stopwatch()
    output = await tool_output(call=call, context=context, tools=tools)
    return output, clock.fact(outcome=tool_outcome(output.is_error))


def _steers_store(*, session_id: str, incarnation: str, turn_id: str) -> list[EntryRecord]:
    """Store the steers waiting for the running turn as user messages of it (docs/design.md
    §18), taking their rows in the same transaction. Most steps find none: one indexed
    read, and no write transaction (on SQLite every transaction takes the write lock)."""
    if not steers_waiting(session_id=session_id, incarnation=incarnation):
        return []
    with transaction.atomic():
        steers = steers_take(session_id=session_id, incarnation=incarnation)
        if not steers:
            return []
        return get_store().append(
            session_id,
            [
                NewEntry(
                    role="user",
                    content=steer.text,
                    turn_id=turn_id,
                    data={"steer": True, "queue_id": steer.queue_id},
                )
                for steer in steers
            ],
            incarnation=incarnation,
        )


def _abort_local(session_id: str) -> bool:
    """Stop the session's turn if it runs here (True). A turn still starting here is flagged
    too, but answers False: the turn that holds the lease may run elsewhere."""
    with _running_lock:
        local = _running.get(session_id)
        if local is None and session_id in _starting:
            _starting[session_id][0].set()
    if local is not None:
        local.set()
    return local is not None


def turn_abort_local_of_owner(*, session_id: str, owner_id: int) -> bool:
    """Stop the session's turn if this process runs it for `owner_id`; False otherwise. No
    query and no thread: a tab's Stop reaches a turn of its own worker before anything else
    it waits for (the ownership check, the lease mark).

    A turn of the owner that is still starting here is flagged too (it stops before its
    model call), but this answers False for it: a turn of the session may be running on
    another worker meanwhile, and the caller goes on to stop that one."""
    with _running_lock:
        local = _running.get(session_id)
        if local is None or _running_owner.get(session_id) != owner_id:
            starting, starter = _starting.get(session_id, (None, None))
            if starting is not None and starter == owner_id:
                starting.set()
            return False
    local.set()
    return True


def turn_abort_local(*, session_id: str) -> bool:
    """Stop the session's turn if this process runs it (the live bus asks for it when the
    Stop button was pressed on another worker); False when it does not run here."""
    return _abort_local(session_id)


def turns_abort_all_local() -> int:
    """Stop every turn this process runs (a drain whose grace period ran out); returns how
    many. Each closes as any aborted turn does."""
    with _running_lock:
        aborts = list(_running.values())
    for abort in aborts:
        abort.set()
    return len(aborts)


def turn_abort(*, session_id: str) -> bool:
    """Stop the session's running turn, whichever process runs it; False when none runs.

    The turn's own process sees the abort at once, another process within a watch interval
    (a mark on the lease). Clients learn of it from the turn's `agent_end`, whose status is
    "aborted".
    """
    validate_session_id(session_id)
    local = _abort_local(session_id)
    remote = lease_request_abort(session_id=session_id)
    return local or remote


async def turn_abort_async(*, session_id: str) -> bool:
    """`turn_abort` for the event loop: a turn of this process stops at once, with no thread
    or query in between; the lease mark for other processes goes through the small control
    pool, so an abort never queues behind turns' work."""
    validate_session_id(session_id)
    local = _abort_local(session_id)
    remote = await in_pool("control", lease_request_abort, session_id=session_id)
    return local or remote
