"""Talking to a running turn (docs/design.md §18): queue, steer, interrupt, and running what
waits.

A prompt with a `mode` other than `reject` becomes a durable row (runtime.turn.queue) under the
session's lock, every tab hears `queued`, and the row is run by whichever worker takes the
session's lease next: the one whose turn just ended (runtime.turn.turns hands the session to
`queue_kick`), the sender's own worker when the session was idle, the next worker a tab
connects to, or — when the worker running the turn died — any worker's periodic sweep,
within QUEUE_SWEEP_SEC of the lease running out.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import threading
import time
from collections.abc import Callable
from contextlib import contextmanager

from django.conf import settings
from django.db import connections

from jarvis_site.shared.errors import Code, DomainError
from sessions_app import selectors
from sessions_app.core import limits
from sessions_app.core.owners import may_act_on
from sessions_app.runtime.loop import server_loop
from sessions_app.runtime.loop.drain import Draining, session_turn_running
from sessions_app.runtime.loop.executors import in_pool, in_sync_caller
from sessions_app.runtime.turn import queue, turns
from sessions_app.runtime.turn.lease import SessionBusy
from sessions_app.services import broadcasts, files
from sessions_app.services import turns as turn_services
from sessions_app.store import SessionNotFound, get_store

logger = logging.getLogger(__name__)

QUEUE, STEER, INTERRUPT, REJECT = "queue", "steer", "interrupt", "reject"
# What a prompt whose text is not a string (a number, null, a list) is told, over the WebSocket
# and over HTTP alike.
PROMPT_NOT_TEXT = 'a prompt has a "text" string'
MODES = (QUEUE, STEER, INTERRUPT, REJECT)

_runs: set[asyncio.Task] = set()
_last_sweep = [0.0]
# session id -> (listener, model) of a terminal chat in this process: the turns this process
# runs from that session's queue show there too, with the model the chat was started with.
_watchers: dict[str, tuple[Callable[[dict], object], str | None]] = {}


class BadMode(DomainError, ValueError):
    """A prompt's `mode` is none of MODES (400 / error `bad_request`)."""

    code = Code.BAD_REQUEST

    def __init__(self, mode: object):
        super().__init__(f"mode is one of {', '.join(MODES)}, not {mode!r}")


def prompt_mode_check(mode: object) -> str:
    """The mode of a prompt; absent means `reject`, today's behaviour."""
    if mode is None:
        return REJECT
    if mode not in MODES:
        raise BadMode(mode)
    return mode


def prompt_enqueue(
    *,
    session_id: str,
    owner_id: int | None,
    text: str,
    mode: str,
    attachments: list[str] | None = None,
) -> queue.Waiting:
    """Store a prompt sent with `queue`, `steer` or `interrupt`; returns it with its place.

    Steps: check the text and that the session is the caller's; under the session's lock
    (so that two tabs' prompts never take one place, and an interrupt's prompt is the very
    next), add the row — at the end, or first for `interrupt` — QueueFull past
    MAX_QUEUED_PER_SESSION; after commit every tab gets `queued`; for `interrupt`, abort the
    running turn (it closes as any abort, then its worker runs this prompt); finally run
    the queue here if the session is idle. `attachments` (ids of the session's files) go
    with a queued or interrupting prompt, not a steer (AttachmentsNotSteered).
    """
    limits.prompt_check(text)
    if attachments and mode == STEER:
        raise files.AttachmentsNotSteered()
    meta = selectors.session_get(session_id=session_id, owner_id=owner_id)
    refs = files.attachments_for_prompt(session_id=session_id, file_ids=attachments)
    store = get_store()
    with store.locked(session_id, agent=meta.agent, owner_id=meta.owner_id):
        meta = store.get_meta(session_id)  # as of now, under the lock
        if meta is None or not may_act_on(meta.owner_id, owner_id):
            raise SessionNotFound(session_id)
        waiting = queue.queue_add(
            session_id=session_id,
            incarnation=meta.incarnation,
            owner_id=meta.owner_id,
            text=text,
            kind=queue.STEER if mode == STEER else queue.QUEUE,
            first=mode == INTERRUPT,
            attachments=refs,
        )
        broadcasts.session_broadcast_on_commit(
            session_id=session_id, event={"type": "queued", **waiting.to_api()}
        )
    if mode == INTERRUPT:
        turns.turn_abort(session_id=session_id)
    queue_kick(session_id)
    return waiting


def queue_cancel(*, session_id: str, owner_id: int | None, queue_id: str) -> None:
    """Remove a waiting prompt of the caller's session; every tab gets `queue_cancelled`.
    QueuedPromptNotFound when it already ran or was cancelled (from another tab, say)."""
    selectors.session_get(session_id=session_id, owner_id=owner_id)
    limits.text_check(queue_id, name="queue_id", max_chars=40, min_chars=1)
    queue.queue_remove(session_id=session_id, queue_id=queue_id)
    broadcasts.session_broadcast_on_commit(
        session_id=session_id, event={"type": "queue_cancelled", "queue_id": queue_id}
    )


# --- running what waits ----------------------------------------------------------------------


@contextmanager
def queue_watch(session_id: str, on_event: Callable[[dict], object], provider: str | None = None):
    """While inside, turns this process runs from the session's queue also send their events
    to `on_event` and use `provider` (the terminal chat shows what it queued as it runs)."""
    _watchers[session_id] = (on_event, provider)
    try:
        yield
    finally:
        _watchers.pop(session_id, None)


def queue_busy(session_id: str) -> bool:
    """Whether a turn of the session runs in this process, or prompts of it wait. Never false
    in between two queued turns: a queued row goes in the same transaction that stores its
    turn's first entries, while that turn already counts as running."""
    return session_turn_running(session_id) or queue.queue_waiting(session_id)


async def queue_run_async(*, session_id: str) -> None:
    """Run the session's next waiting prompt as a turn, if this worker can take the lease now.

    One turn: when it ends, the turn itself hands the session back to `queue_kick` if more
    waits. Returns at once when another turn holds the session (its worker runs the queue
    when that turn ends), when this worker drains (another worker's sweep runs it), or when
    the user already runs MAX_TURNS_PER_USER turns (the sweep retries).
    """
    store = get_store()
    meta = await in_pool("store", store.get_meta, session_id)
    if meta is None:
        await in_pool("store", queue.queue_clear, session_id=session_id)
        return
    head = await in_pool(
        "store", queue.queue_head, session_id=session_id, incarnation=meta.incarnation
    )
    if head is None:
        return
    watcher, provider = _watchers.get(session_id, (None, None))
    try:
        await turns.turn_run_async(
            session_id=session_id,
            text=head.text,
            owner_id=head.owner_id,
            on_event=turn_services._turn_listener(session_id, watcher),
            provider=provider,
            queue_id=head.queue_id,
            wait_sec=0,
            attachments=head.attachments,
        )
    except (SessionBusy, Draining, turns.TooManyTurns, turns.QueuedPromptGone):
        return
    except Exception:
        # A prompt that cannot start would be retried after every turn: it is dropped, and
        # every tab is told, rather than block the session's queue for good.
        logger.exception("queued prompt %s of session %s could not run", head.queue_id, session_id)
        await in_pool("store", _drop, session_id=session_id, queue_id=head.queue_id)


def _drop(*, session_id: str, queue_id: str) -> None:
    try:
        queue.queue_remove(session_id=session_id, queue_id=queue_id)
    except queue.QueuedPromptNotFound:
        return
    broadcasts.session_broadcast(
        session_id=session_id, event={"type": "queue_cancelled", "queue_id": queue_id}
    )


def _start_run(session_id: str) -> None:
    # A fresh context: nothing of the caller's request or turn carries over.
    task = asyncio.get_running_loop().create_task(
        queue_run_async(session_id=session_id), context=contextvars.Context()
    )
    _runs.add(task)
    task.add_done_callback(_runs.discard)


def _run_in_thread(session_id: str) -> None:
    try:
        asyncio.run(_run_until_the_queue_is_empty(session_id))
    finally:
        connections.close_all()


async def _run_until_the_queue_is_empty(session_id: str) -> None:
    """A turn that ends with prompts waiting hands them to `queue_kick`, which starts the next
    run as a task of this thread's loop: the loop stays until those runs end too. (Closing it
    at once cancelled them, and what was queued waited for the sweep, QUEUE_SWEEP_SEC later.)"""
    await queue_run_async(session_id=session_id)
    loop = asyncio.get_running_loop()
    while pending := [run for run in _runs if run.get_loop() is loop]:
        await asyncio.gather(*pending, return_exceptions=True)


def queue_kick(session_id: str) -> None:
    """Have this worker run the session's next waiting prompt, beside whatever called.

    On a server's event loop it is a task there (a fresh context: nothing of the caller's
    request or turn carries over); from synchronous code it goes to the server's loop when
    this process has one (runtime.loop.server_loop: queues started from the HTTP API or the sweep
    run there, beside the process's other turns, so their events reach this process's
    sockets the way every turn's do), else to a thread of its own (manage.py, a script)."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        loop = None
    if loop is not None and not in_sync_caller():
        # A task at once, not a callback: a loop that runs queued turns for a thread
        # (`_run_until_the_queue_is_empty`) sees it before it decides to close.
        _start_run(session_id)
        return
    serving = server_loop.serving_loop()
    if serving is not None:
        serving.call_soon_threadsafe(_start_run, session_id)
        return
    threading.Thread(
        target=_run_in_thread, args=(session_id,), name="queue-run", daemon=True
    ).start()


def queue_sweep() -> None:
    """Run the queues nobody runs: those a dead worker's turn left (once its lease lapsed),
    or a draining worker handed on. Called after every heartbeat; acts every
    QUEUE_SWEEP_SEC. Each session's lease decides which worker runs it."""
    now = time.monotonic()
    if now - _last_sweep[0] < settings.QUEUE_SWEEP_SEC:
        return
    _last_sweep[0] = now
    for session_id in queue.queue_sessions():
        queue_kick(session_id)
