"""Tool calls that wait for the person's yes or no.

A call of a tool marked `needs_approval` runs only once the person allows it. The assistant
message that made the call is already stored when the gate is reached, so the pending call is
durable before anyone hears of it. The gate then:

1. records a pending request (fenced to the turn's incarnation: a session deleted
   or created anew under the turn never gets it);
2. sends `approval_request {turn_id, call_id, tool, arguments}` through the turn's events,
   which reach every socket of the session in any worker;
3. awaits an asyncio future — no thread waits — until the first of: a decision, the turn's
   abort, or APPROVAL_TIMEOUT_SEC;
4. closes the row and sends `approval_end {turn_id, call_id, status}`.

Requests are rows of the database on every backend (sessions_app.store.approvals). Decisions
are written to them by `services.approvals.approval_decide`, from any socket or the API, in any worker.
One written in this process resolves the future at once (`approval_resolve`); one written in
another is found by the process's lease keeper, which already polls every WATCH_INTERVAL_SEC
for its turns and runs one more query for the approvals this process waits on
(`approval_decisions_poll`, a poll hook sessions_app registers in its AppConfig.ready, so the
lease never imports this module). The database carries the decision, so it works with and
without a shared channel layer. Timeout and abort close the row with a conditional UPDATE
from `pending`, so a decision and a timeout that cross each other leave one outcome: the
row's. A worker that dies while waiting leaves a pending row; the repair on the session's
next use gives the call a result that says so and closes the row (`approvals_interrupted`).
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable
from contextlib import AbstractContextManager

from django.conf import settings

from sessions_app.runtime.loop.executors import in_pool
from sessions_app.runtime.tools.base import TurnAbort
from sessions_app.store import approvals as approval_rows
from sessions_app.store.approvals import ABORTED, ALLOWED, DENIED, TIMED_OUT

# Re-exported: the entry points answer these errors of approval_decide.
from sessions_app.store.approvals import ApprovalClosed as ApprovalClosed
from sessions_app.store.approvals import ApprovalNotFound as ApprovalNotFound

logger = logging.getLogger(__name__)

DENIED_TEXT = "denied: the person did not allow this call, so it did not run"
TIMED_OUT_TEXT = "not run: no answer to the approval request came within {seconds:g} seconds"
ABORTED_TEXT = "not run: the turn was stopped while this call waited for approval"
INTERRUPTED_TEXT = "not run: the worker stopped while this call waited for approval"


# Approvals this process waits on: row id -> (the waiting turn's loop, its future).
_waiting_lock = threading.Lock()
_waiting: dict[int, tuple[asyncio.AbstractEventLoop, asyncio.Future]] = {}


def approval_resolve(approval_id: int, status: str) -> None:
    """Hand a decision to the turn of this process that waits on it, if any (any thread)."""
    with _waiting_lock:
        waiter = _waiting.get(approval_id)
    if waiter is None:
        return
    loop, future = waiter

    def settle() -> None:
        if not future.done():
            future.set_result(status)

    try:
        loop.call_soon_threadsafe(settle)
    except RuntimeError:  # the loop has closed: nobody awaits any more
        pass


def approval_decisions_poll() -> None:
    """One query for decisions on the approvals this process waits on (the lease keeper's)."""
    with _waiting_lock:
        waiting = list(_waiting)
    if not waiting:
        return
    for approval_id, status in approval_rows.decisions(waiting):
        approval_resolve(approval_id, status)


def approval_record(
    *,
    session_id: str,
    turn_id: str,
    call: dict,
    arguments: dict,
    fenced: Callable[[], AbstractContextManager],
) -> int:
    """Store a pending request for this call; returns its id."""
    with fenced():
        return approval_rows.request_insert(
            session_id=session_id,
            turn_id=turn_id,
            call_id=call["id"],
            tool=call["name"],
            arguments=arguments,
        )


def approval_close(*, approval_id: int, status: str) -> str:
    """End a request that is still pending with `status`; returns its status after, which is
    the decision when one came in first."""
    return approval_rows.request_close(approval_id=approval_id, status=status)


def approvals_interrupted(*, session_id: str) -> dict[str, str]:
    """Close the pending requests of a session whose turn died; call id -> the result text.

    Called by the repair, which holds the turn lease: no live turn waits on these requests.
    """
    return dict.fromkeys(approval_rows.requests_interrupt(session_id=session_id), INTERRUPTED_TEXT)


def _refusal(status: str) -> str | None:
    """The result text of a call whose request ended with `status`; None when it may run."""
    if status == ALLOWED:
        return None
    if status == DENIED:
        return DENIED_TEXT
    if status == TIMED_OUT:
        return TIMED_OUT_TEXT.format(seconds=settings.APPROVAL_TIMEOUT_SEC)
    return ABORTED_TEXT


class ApprovalGate:
    """The `approve` of a turn's ToolContext: asks about one call and waits for the answer."""

    def __init__(
        self,
        *,
        session_id: str,
        turn_id: str,
        abort: TurnAbort,
        announce: Callable[[dict], None],
        fenced: Callable[[], AbstractContextManager],
    ):
        self.session_id = session_id
        self.turn_id = turn_id
        self.abort = abort
        self.announce = announce
        self.fenced = fenced

    async def __call__(self, call: dict, arguments: dict) -> str | None:
        if self.abort.is_set():
            return ABORTED_TEXT
        approval_id = await in_pool(
            "store",
            approval_record,
            session_id=self.session_id,
            turn_id=self.turn_id,
            call=call,
            arguments=arguments,
            fenced=self.fenced,
        )
        loop = asyncio.get_running_loop()
        decision = loop.create_future()
        with _waiting_lock:
            _waiting[approval_id] = (loop, decision)
        try:
            self.announce(
                {
                    "type": "approval_request",
                    "turn_id": self.turn_id,
                    "call_id": call["id"],
                    "tool": call["name"],
                    "arguments": arguments,
                }
            )
            status = await self._outcome(approval_id, decision)
        finally:
            with _waiting_lock:
                _waiting.pop(approval_id, None)
        logger.info("approval of %s in %s: %s", call["id"], self.session_id, status)
        self.announce(
            {
                "type": "approval_end",
                "turn_id": self.turn_id,
                "call_id": call["id"],
                "status": status,
            }
        )
        return _refusal(status)

    async def _outcome(self, approval_id: int, decision: asyncio.Future) -> str:
        """The first of: the decision, the abort, the timeout — as the row records it."""
        stopped = asyncio.ensure_future(self.abort.wait_async(None))
        try:
            await asyncio.wait(
                {decision, stopped},
                timeout=settings.APPROVAL_TIMEOUT_SEC,
                return_when=asyncio.FIRST_COMPLETED,
            )
        finally:
            stopped.cancel()
        if self.abort.is_set():
            # A stopped turn runs nothing more, even a call allowed a moment before.
            await in_pool("store", approval_close, approval_id=approval_id, status=ABORTED)
            return ABORTED
        if decision.done():
            return decision.result()
        return await in_pool("store", approval_close, approval_id=approval_id, status=TIMED_OUT)
