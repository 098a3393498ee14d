"""SANDBOX_CONCURRENCY runs at once per worker process; the others wait, holding no thread.

A worker's turns run on its event loop, but a synchronous caller (the HTTP API, a command)
runs its turn on an event loop of its own: the count is the process's, so slots are handed
between loops under a thread lock, and a waiter is woken on its own loop.
"""

from __future__ import annotations

import asyncio
import threading
from collections import deque

from django.conf import settings


class _Waiter:
    def __init__(self, loop: asyncio.AbstractEventLoop):
        self.loop = loop
        self.future = loop.create_future()
        self.handed = False  # a slot is this waiter's (set under the lock)


class RunSlots:
    def __init__(self):
        self._lock = threading.Lock()
        self._busy = 0
        self._waiters: deque[_Waiter] = deque()

    async def acquire(self, abort) -> bool:
        """Take a slot (True), or give up when the turn is stopped first (False)."""
        with self._lock:
            if self._busy < settings.SANDBOX_CONCURRENCY:
                self._busy += 1
                return True
            waiter = _Waiter(asyncio.get_running_loop())
            self._waiters.append(waiter)
        stop = asyncio.ensure_future(abort.wait_async(None))
        try:
            await asyncio.wait({waiter.future, stop}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stop.cancel()
        with self._lock:
            if waiter.handed:
                if not abort.is_set():
                    return True
            else:
                self._waiters.remove(waiter)
                return False
        self.release()  # handed a slot just as the Stop came
        return False

    def release(self) -> None:
        with self._lock:
            while self._waiters:
                waiter = self._waiters.popleft()
                waiter.handed = True
                try:
                    waiter.loop.call_soon_threadsafe(_wake, waiter.future)
                    return
                except RuntimeError:  # its loop closed: the slot goes to the next one
                    waiter.handed = False
            self._busy -= 1


def _wake(future: asyncio.Future) -> None:
    if not future.done():
        future.set_result(True)


SLOTS = RunSlots()
