"""Draining: a worker told to stop finishes what it runs and starts nothing new (docs/design.md §19).

This module holds the worker's state: whether it drains, which turns run in it, which
sockets it serves. `drain_begin` flips the switch (readiness answers 503 from then on); a new
turn is refused with `Draining` from the same instant, under the same lock that counts the
running ones, so no turn slips in after the drain has counted. The server (jarvis_site.server)
runs the drain itself: it waits for the running turns, aborts what is left after
DRAIN_TIMEOUT_SEC, closes every socket with 1012 once its session's turn has ended, and stops.
"""

from __future__ import annotations

import asyncio
import threading
from collections import Counter
from contextlib import contextmanager
from contextvars import ContextVar

from jarvis_site.shared.errors import Code, DomainError

# How often a drain looks at the turns still running. Only a draining worker polls, for the
# few seconds its last turns take.
DRAIN_POLL_SEC = 0.05

_lock = threading.Lock()
_draining = False
_turns: Counter[str] = Counter()
_sockets: set = set()
# Set inside a running turn: a sub-agent turn it starts (delegation) is part of its work and
# runs even while the worker drains.
_inside_turn: ContextVar[bool] = ContextVar("inside_turn", default=False)


class Draining(DomainError):
    """This worker is shutting down: the request should go to another one (HTTP 503)."""

    code = Code.DRAINING

    def __init__(self):
        super().__init__("this server is restarting; try again in a moment")


def drain_begin() -> bool:
    """Start draining; False when the worker already drains."""
    global _draining
    with _lock:
        started, _draining = not _draining, True
    return started


def is_draining() -> bool:
    return _draining


@contextmanager
def turn_admitted(session_id: str):
    """Count a turn of this worker while it runs; refuse a new one with Draining once
    draining (a turn started by a running turn is not new)."""
    with _lock:
        if _draining and not _inside_turn.get():
            raise Draining()
        _turns[session_id] += 1
    token = _inside_turn.set(True)
    try:
        yield
    finally:
        _inside_turn.reset(token)
        with _lock:
            _turns[session_id] -= 1
            if not _turns[session_id]:
                del _turns[session_id]


def turns_running() -> int:
    with _lock:
        return sum(_turns.values())


def session_turn_running(session_id: str) -> bool:
    with _lock:
        return session_id in _turns


async def turns_done(*, session_id: str | None = None, timeout: float | None = None) -> bool:
    """Wait until no turn (of `session_id`, or at all) runs in this worker; False on timeout."""
    loop = asyncio.get_running_loop()
    deadline = None if timeout is None else loop.time() + timeout
    while session_turn_running(session_id) if session_id else turns_running():
        if deadline is not None and loop.time() >= deadline:
            return False
        await asyncio.sleep(DRAIN_POLL_SEC)
    return True


def socket_register(socket) -> None:
    """A socket the drain must close (an object with `async drain_close()`)."""
    with _lock:
        _sockets.add(socket)


def socket_unregister(socket) -> None:
    with _lock:
        _sockets.discard(socket)


def sockets_open() -> list:
    with _lock:
        return list(_sockets)
