"""Handshakes with the turns a test runs, so that a test waits for what happened instead of
for time to pass. Each replaces the `wait` tool or wraps the turn lease for one test
(through monkeypatch), in this process only:

- `signal_waits`: an event set when a `wait` call starts (the real tool runs);
- `hold_waits`: every `wait` call says it started, then waits until the test releases it;
- `meeting_waits`: `wait` calls return only once all of them run at the same time;
- `lease_contention`: an event set when a turn finds its session's lease taken;
- `pool_threads_taken`: every thread of a worker's pool held by the test until it lets go.
"""

import asyncio
import threading
from contextlib import asynccontextmanager
from dataclasses import replace

from sessions_app.runtime.loop import executors
from sessions_app.runtime.tools.registry import TOOLS
from sessions_app.store.db_lease import DbTurnLease
from sessions_app.store.file_lease import FileTurnLease
from tests.helpers import GUARD_SEC


def signal_waits(monkeypatch) -> threading.Event:
    """Set once a `wait` call has started; the call then runs as the real tool."""
    started = threading.Event()
    real = TOOLS["wait"].arun

    async def arun(context, arguments):
        started.set()
        return await real(context, arguments)

    monkeypatch.setitem(TOOLS, "wait", replace(TOOLS["wait"], arun=arun))
    return started


class HeldWaits:
    """The `wait` tool held by the test: a call sets `started`, waits for `release()`, then
    runs as the real tool (so a prompt asks for a short wait)."""

    def __init__(self):
        self.started = threading.Event()
        self._released = threading.Event()
        self._real = TOOLS["wait"].arun

    def release(self) -> None:
        self._released.set()

    async def arun(self, context, arguments):
        self.started.set()
        # Waits in an executor thread: the turn's event loop keeps serving everything else.
        loop = asyncio.get_running_loop()
        if not await loop.run_in_executor(None, self._released.wait, GUARD_SEC):
            raise RuntimeError("the test never released the held wait")
        return await self._real(context, arguments)


def hold_waits(monkeypatch) -> HeldWaits:
    held = HeldWaits()
    monkeypatch.setitem(TOOLS, "wait", replace(TOOLS["wait"], arun=held.arun))
    return held


def meeting_waits(monkeypatch, parties: int) -> None:
    """`wait` calls meet at a barrier of `parties` before running as the real tool: calls run
    one after the other never meet, and the first one's result is an error."""
    barrier = threading.Barrier(parties, timeout=GUARD_SEC)
    real = TOOLS["wait"].arun

    async def arun(context, arguments):
        await asyncio.get_running_loop().run_in_executor(None, barrier.wait)
        return await real(context, arguments)

    monkeypatch.setitem(TOOLS, "wait", replace(TOOLS["wait"], arun=arun))


def lease_contention(monkeypatch) -> threading.Event:
    """Set once a turn has tried to take its session's lease and found it held."""
    refused = threading.Event()
    for kind in (DbTurnLease, FileTurnLease):

        def try_acquire(self, _real=kind.try_acquire):
            taken = _real(self)
            if not taken:
                refused.set()
            return taken

        monkeypatch.setattr(kind, "try_acquire", try_acquire)
    return refused


@asynccontextmanager
async def pool_threads_taken(
    name: str, threads: int, *, why_not: str = "a thread of the pool never came free"
):
    """Take all `threads` threads of the pool `name` with work the test holds (streaming
    turns' writes, say): entered once every one runs such work (else AssertionError with
    `why_not`). Yields one event per thread: setting one lets that thread go; leaving lets
    every one go and waits for them."""
    releases = [threading.Event() for _ in range(threads)]
    running = threading.Semaphore(0)

    def held(index):
        running.release()
        # Longer than the taking waits for a thread: a thread that never came free shows as
        # that, not as the others' waits running out first.
        assert releases[index].wait(2 * GUARD_SEC), "the test never let its thread go"

    holding = [asyncio.ensure_future(executors.in_pool(name, held, i)) for i in range(threads)]
    failed = True
    try:
        for _ in range(threads):
            assert await asyncio.to_thread(running.acquire, True, GUARD_SEC), why_not
        yield releases
        failed = False
    finally:
        for release in releases:
            release.set()
        if failed:
            for task in holding:
                task.cancel()  # what has not started is dropped: the failure shows as it is
        async with asyncio.timeout(GUARD_SEC):
            await asyncio.gather(*holding, return_exceptions=failed)
