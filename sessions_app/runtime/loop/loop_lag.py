"""How late a worker's event loop runs what is ready (docs/design.md §26).

Every socket, turn and stream of a worker shares its one event loop: when the CPU work
queued on it outgrows a core, everything waits its turn. A tick scheduled every
TICK_SEC measures by how much it ran late. The worst lateness of the last WINDOW_SEC is

- observed into `jarvis_event_loop_lag_seconds` (each tick), for the operator;
- what `/readyz` compares with OVERLOADED_LOOP_LAG_SEC (off by default), so that a proxy
  stops sending new sockets to a worker that cannot serve them;
- what a turn's delta coalescing reads (services.broadcasts): while the loop is behind,
  streamed text leaves in fewer, larger pieces, which is less work for the loop.

The tick is a `call_later` chain, not a task: a loop that closes (a test's) drops it
without a warning. `watch()` starts it once per loop; a worker's sockets call it.
"""

from __future__ import annotations

import asyncio
import threading
from collections import deque

from jarvis_site.shared import metrics
from sessions_app.runtime.loop.running import running_loop

TICK_SEC = 0.05
WINDOW_SEC = 2.0


class _LoopLag:
    def __init__(self, loop: asyncio.AbstractEventLoop):
        self.loop = loop
        self.recent: deque[tuple[float, float]] = deque()  # (loop time, lag), last WINDOW_SEC
        self.worst = 0.0  # of `recent`; read from other threads
        self.due = loop.time() + TICK_SEC
        loop.call_at(self.due, self._tick)

    def _tick(self) -> None:
        now = self.loop.time()
        lag = max(0.0, now - self.due)
        metrics.EVENT_LOOP_LAG.observe(lag)
        self.recent.append((now, lag))
        while self.recent[0][0] < now - WINDOW_SEC:
            self.recent.popleft()
        self.worst = max(late for _, late in self.recent)
        self.due = now + TICK_SEC
        self.loop.call_at(self.due, self._tick)

    def lag(self) -> float:
        """The worst lateness of the last WINDOW_SEC, or the tick's own if it is later.
        asyncio's loop clock is time.monotonic(), so any thread may ask."""
        return max(self.worst, self.loop.time() - self.due, 0.0)


_lock = threading.Lock()
_watched: dict[asyncio.AbstractEventLoop, _LoopLag] = {}
_worker: list[_LoopLag] = []  # the loop watched last: in a server, the worker's own


def watch() -> None:
    """Start measuring the running loop's lag (once per loop)."""
    loop = asyncio.get_running_loop()
    with _lock:
        for closed in [other for other in _watched if other.is_closed()]:
            del _watched[closed]
        if loop not in _watched:
            _watched[loop] = _LoopLag(loop)
            _worker[:] = [_watched[loop]]


def current() -> float:
    """The running loop's lag in seconds; 0 when it is not watched."""
    watched = _watched.get(running_loop())
    return watched.lag() if watched is not None else 0.0


def worker_lag() -> float:
    """The lag of the worker's loop, from any thread (the readiness probe runs in one)."""
    with _lock:
        watched = _worker[0] if _worker else None
    if watched is None or watched.loop.is_closed():
        return 0.0
    return watched.lag()
