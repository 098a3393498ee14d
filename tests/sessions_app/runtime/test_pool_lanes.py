"""A new turn's start goes ahead of the store work already waiting (docs/design.md §26):
under a burst, the store pool's queue holds the writes of every streaming turn, and a turn
that starts must not wait for all of them before its first model call."""

import asyncio
import threading

import pytest
from django.conf import settings

from sessions_app.runtime import executors
from tests.helpers import GUARD_SEC

pytestmark = pytest.mark.anyio

QUEUED = 20


async def test_work_submitted_first_runs_before_the_work_already_queued():
    threads = settings.STORE_THREADS
    release = [threading.Event() for _ in range(threads)]
    busy = threading.Semaphore(0)
    ran: list[str] = []

    def hold(index):  # a streaming turn's write, taking a thread until the test lets go
        busy.release()
        assert release[index].wait(GUARD_SEC)

    holding = [asyncio.ensure_future(executors.in_pool("store", hold, i)) for i in range(threads)]
    for _ in range(threads):  # every thread of the pool is taken
        assert await asyncio.to_thread(busy.acquire, True, GUARD_SEC)
    queued = [
        asyncio.ensure_future(executors.in_pool("store", ran.append, f"write {i}"))
        for i in range(QUEUED)
    ]
    await asyncio.sleep(0)  # every write is in the pool's queue
    start = asyncio.ensure_future(executors.in_pool_first("store", ran.append, "turn start"))
    await asyncio.sleep(0)

    release[0].set()  # one thread frees up: it takes the start, not the oldest write
    async with asyncio.timeout(GUARD_SEC):
        await start
    for event in release:
        event.set()
    async with asyncio.timeout(GUARD_SEC):
        await asyncio.gather(*holding, *queued)
    # Every write was queued before the start was submitted, and the start ran first.
    assert ran[0] == "turn start"
    assert sorted(ran[1:], key=lambda w: int(w.split()[1])) == [f"write {i}" for i in range(QUEUED)]
