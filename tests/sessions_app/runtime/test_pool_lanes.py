"""A new turn's start goes ahead of the store work already waiting (docs/design.md §26):
under a burst, the store pool's queue holds the writes of every streaming turn, and a turn
that starts must not wait for all of them before its first model call."""

import asyncio
import threading

import pytest
from django.conf import settings

from sessions_app.runtime.loop import executors
from sessions_app.runtime.loop.eager import AT_ONCE
from sessions_app.runtime.tools.base import TurnAbort
from tests.handshakes import pool_threads_taken
from tests.helpers import GUARD_SEC

pytestmark = pytest.mark.anyio

QUEUED = 20


async def test_work_submitted_first_runs_before_the_work_already_queued():
    ran: list[str] = []
    # Every thread of the pool is taken (by streaming turns' writes, say).
    async with pool_threads_taken("store", settings.STORE_THREADS) as release:
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
    async with asyncio.timeout(GUARD_SEC):
        await asyncio.gather(*queued)
    # Every write was queued before the start was submitted, and the start ran first.
    assert ran[0] == "turn start"
    assert sorted(ran[1:], key=lambda w: int(w.split()[1])) == [f"write {i}" for i in range(QUEUED)]


async def test_a_stopped_turns_start_leaves_the_queue_of_starts():
    # 0.5 s into a burst on two workers a turn's start may still wait behind hundreds of
    # others: its Stop must not wait for them. The start moves to the control pool, runs
    # once, and the stopped turn ends with its message stored.
    ran: list[str] = []
    async with pool_threads_taken("store", settings.STORE_THREADS):
        others = [
            asyncio.ensure_future(executors.in_pool_first("store", ran.append, f"start {i}"))
            for i in range(QUEUED)
        ]
        abort = TurnAbort()
        stopped = asyncio.ensure_future(executors.start_in_pool(abort, ran.append, "stopped start"))
        await asyncio.sleep(0)
        abort.set()
        async with asyncio.timeout(GUARD_SEC):
            await stopped
        assert ran == ["stopped start"]  # every store thread is still taken
    async with asyncio.timeout(GUARD_SEC):
        await asyncio.gather(*others)
    assert ran.count("stopped start") == 1 and len(ran) == QUEUED + 1


async def test_a_start_a_thread_has_taken_is_waited_for_not_run_twice():
    taken, finish = threading.Event(), threading.Event()
    runs: list[str] = []

    def start():
        runs.append("start")
        taken.set()
        assert finish.wait(GUARD_SEC)
        return "started"

    abort = TurnAbort()
    starting = asyncio.ensure_future(executors.start_in_pool(abort, start))
    assert await asyncio.to_thread(taken.wait, GUARD_SEC)
    abort.set()
    await asyncio.sleep(0)
    assert not starting.done()  # the start's writes are under way: the turn waits for them
    finish.set()
    async with asyncio.timeout(GUARD_SEC):
        assert await starting == "started"
    assert runs == ["start"]


@pytest.mark.parametrize("step", ["start", "close"])
async def test_a_turn_started_at_once_goes_ahead_of_the_bursts_starts(step):
    # A person's turn sent half a second into a burst found a hundred starts queued ahead
    # of it on each of two workers, and waited 0.9 s for a store thread. Started at once
    # (at most one per START_AT_ONCE_EVERY_SEC), its start takes the next thread; so does
    # its closing, which would have waited behind the same starts.
    ran: list[str] = []

    async def started_at_once():
        AT_ONCE.set(True)
        if step == "start":
            return await executors.start_in_pool(TurnAbort(), ran.append, "at once")
        return await executors.in_pool_first("store", ran.append, "at once")

    async with pool_threads_taken("store", settings.STORE_THREADS) as release:
        burst = [
            asyncio.ensure_future(executors.start_in_pool(TurnAbort(), ran.append, f"start {i}"))
            for i in range(QUEUED)
        ]
        await asyncio.sleep(0)  # the burst's starts are queued
        at_once = asyncio.ensure_future(started_at_once())
        await asyncio.sleep(0)
        release[0].set()
        async with asyncio.timeout(GUARD_SEC):
            await at_once
    async with asyncio.timeout(GUARD_SEC):
        await asyncio.gather(*burst)
    assert ran[0] == "at once"
    # The burst's own starts keep their order behind it.
    assert ran[1:] == [f"start {i}" for i in range(QUEUED)]
