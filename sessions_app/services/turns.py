"""A turn: send a message (run the turn), abort it.

Every write is a service (docs/design.md §16: one module per action family)."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable
from typing import Any

from sessions_app import selectors
from sessions_app.runtime.live import live
from sessions_app.runtime.loop.eager import start_task
from sessions_app.runtime.loop.executors import in_pool, in_pool_first
from sessions_app.runtime.turn import turns
from sessions_app.services.broadcasts import turn_event_broadcaster
from sessions_app.services.files import attachments_for_prompt
from sessions_app.store import SessionMeta


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
    attachments: list[str] | None = None,
) -> turns.TurnResult:
    """Run one turn of the caller's session to its end; every open tab watches it happen.

    Steps: check the session is the caller's; run the turn (runtime.turn.turns: SessionBusy when
    another turn holds the session past BUSY_GRACE_SEC, TooManyTurns past
    MAX_TURNS_PER_USER) with its events going to the session's group as they happen, and to
    `on_event` too when given. `provider` overrides the session's model for this turn.
    `attachments`: ids of files uploaded to the session (AttachmentUnknown for others).
    Synchronous callers (the HTTP API, manage.py chat) do the turn's store work in their own
    thread, on their own database connection.
    """
    meta = selectors.session_get(session_id=session_id, owner_id=owner_id)
    files = attachments_for_prompt(session_id=session_id, file_ids=attachments)
    return turns.turn_run(
        session_id=session_id,
        text=text,
        owner_id=owner_id,
        on_event=_turn_listener(session_id, on_event),
        provider=provider,
        meta=meta,
        attachments=files,
    )


def _owned_with_attachments(
    *, session_id: str, owner_id: int | None, attachments: list[str] | None
) -> tuple[SessionMeta, list[dict]]:
    meta = selectors.session_get(session_id=session_id, owner_id=owner_id)
    return meta, attachments_for_prompt(session_id=session_id, file_ids=attachments)


async def turn_send_async(
    *, session_id: str, owner_id: int | None, text: str, attachments: list[str] | None = None
) -> turns.TurnResult:
    """`turn_send` for the event loop (the WebSocket): the turn runs on the caller's loop, its
    model call holds no thread, its store work and blocking tools go through bounded pools.
    A person's prompt without attachments reads nothing first: the turn's lease is taken for
    that person's session only, and that taking is the ownership check (runtime.turn.turns)."""
    meta, files = None, []
    if not isinstance(owner_id, int) or (attachments is not None and attachments != []):
        # A pool call of its own, ahead of the writes of turns already streaming (§26).
        meta, files = await in_pool_first(
            "store",
            _owned_with_attachments,
            session_id=session_id,
            owner_id=owner_id,
            attachments=attachments,
        )
    return await turns.turn_run_async(
        session_id=session_id,
        text=text,
        owner_id=owner_id,
        on_event=turn_event_broadcaster(session_id),
        meta=meta,
        attachments=files,
    )


def turn_abort(*, session_id: str, owner_id: int | None) -> bool:
    """Stop the running turn of the caller's session, whichever process runs it; False when
    none runs. Tabs learn of it from the turn's `agent_end` with status "aborted"."""
    selectors.session_get(session_id=session_id, owner_id=owner_id)
    return turns.turn_abort(session_id=session_id)


def turn_abort_here(*, session_id: str, owner_id: int) -> bool:
    """Stop the caller's turn of the session if it runs on this worker; False otherwise. A
    flag, no query and no thread: safe to call from the server's read of a socket (a Stop
    read where it arrives, sessions_app/web/frame_lane.py)."""
    return turns.turn_abort_local_of_owner(session_id=session_id, owner_id=owner_id)


async def turn_abort_async(
    *, session_id: str, owner_id: int | None, owner_known: bool = False
) -> bool:
    """`turn_abort` for the event loop. A turn of the caller's that runs on this worker stops
    at once, with no query or thread in between (the turn knows its owner). Otherwise the
    check goes through the small control pool, like the lease mark: an abort never queues
    behind turns' work.

    `owner_known`: the caller holds proof that the session is `owner_id`'s (a socket accepted
    for it; a session never changes owner). The Stop then leaves for the other workers
    before the check, which only finds out whether the session still exists: that query's
    way through a thread and back took a fifth of a second on a busy worker."""
    if owner_id is not None and turns.turn_abort_local_of_owner(
        session_id=session_id, owner_id=owner_id
    ):
        return True
    # The live bus reaches a turn on another worker at once: its PUBLISH is written in the
    # step that starts it, not in a task's first step a pass of the loop later (a quarter
    # of a second on a worker starting a storm of turns). The lease mark (through the small
    # control pool) reaches it within a watch interval, with or without Redis.
    elsewhere = start_task(live.abort_elsewhere(session_id=session_id)) if owner_known else None
    try:
        await in_pool("control", selectors.session_get, session_id=session_id, owner_id=owner_id)
    except BaseException:
        if elsewhere is not None:  # a session gone meanwhile: its Stop reached nobody
            await asyncio.gather(elsewhere, return_exceptions=True)
        raise
    if elsewhere is None:
        elsewhere = start_task(live.abort_elsewhere(session_id=session_id))
    here_or_marked, reached = await asyncio.gather(
        turns.turn_abort_async(session_id=session_id), elsewhere
    )
    return here_or_marked or reached
