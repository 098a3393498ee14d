"""A Stop goes ahead of the event loop's streaming work (docs/design.md §26): the turn's
step after the Stop, and after its writes in the control pool, runs before the callbacks
that were already waiting in the loop, not one or two passes later."""

import asyncio
import concurrent.futures
import threading
from collections import deque

import pytest
from django.conf import settings

from sessions_app.runtime.loop import executors
from sessions_app.runtime.loop.loop_lane import wait_first
from sessions_app.runtime.tools.base import TurnAbort
from tests.helpers import GUARD_SEC

STREAMING = 3  # callbacks of streaming turns already waiting when the thread finishes


class _NotingQueue(deque):
    """The loop's ready queue, telling a waiting thread when a callback is handed to it."""

    def __init__(self, ready: deque, handed: threading.Event):
        super().__init__(ready)
        self.handed = handed

    def append(self, handle) -> None:
        super().append(handle)
        self.handed.set()

    def appendleft(self, handle) -> None:
        super().appendleft(handle)
        self.handed.set()


def resumed_order(await_result, finish_in_thread) -> list[str]:
    """Start a task that awaits `await_result()`; once it waits, queue STREAMING callbacks
    on the loop, then let a thread finish the work and wait until its result is handed to
    the loop. The order in which the task and the callbacks then ran."""
    ran: list[str] = []

    async def scenario():
        loop = asyncio.get_running_loop()
        waiting = asyncio.Event()

        async def control():
            waiting.set()
            ran.append(f"control got {await await_result()}")

        task = asyncio.create_task(control())
        await waiting.wait()
        await asyncio.sleep(0)  # the task now waits on the result's future

        def a_pass_of_streaming_work():
            for index in range(STREAMING):
                loop.call_soon(ran.append, f"streaming {index}")
            # The thread's result reaches the loop through its ready queue (a callback).
            handed = threading.Event()
            loop._ready = _NotingQueue(loop._ready, handed)
            thread = threading.Thread(target=finish_in_thread)
            thread.start()
            thread.join(GUARD_SEC)
            assert handed.wait(GUARD_SEC), "the thread's result never reached the loop"

        loop.call_soon(a_pass_of_streaming_work)
        async with asyncio.timeout(GUARD_SEC):
            await task
        await asyncio.sleep(0)

    asyncio.run(scenario())
    return ran


def test_a_result_awaited_first_resumes_its_task_before_the_waiting_callbacks():
    done = concurrent.futures.Future()
    order = resumed_order(lambda: wait_first(done), lambda: done.set_result("42"))
    assert order == ["control got 42"] + [f"streaming {i}" for i in range(STREAMING)]


def test_a_plain_wrapped_result_waits_behind_them():
    """What the lane changes: the usual way, the task steps after every waiting callback."""
    done = concurrent.futures.Future()
    order = resumed_order(lambda: asyncio.wrap_future(done), lambda: done.set_result("42"))
    assert order == [f"streaming {i}" for i in range(STREAMING)] + ["control got 42"]


def test_a_stops_writes_in_the_control_pool_come_back_first():
    release = threading.Event()

    def the_closing():
        assert release.wait(GUARD_SEC)
        return "the closing"

    order = resumed_order(lambda: executors.in_pool("control", the_closing), release.set)
    assert order[0] == "control got the closing"
    assert order[1:] == [f"streaming {i}" for i in range(STREAMING)]


def test_a_turns_start_comes_back_first_from_its_store_thread():
    """A start awaits its thread raced with its Stop (start_in_pool): it still resumes in
    the callback the thread's end puts first, not a pass or two later."""
    release = threading.Event()

    def the_start():
        assert release.wait(GUARD_SEC)
        return "the start"

    order = resumed_order(lambda: executors.start_in_pool(TurnAbort(), the_start), release.set)
    assert order[0] == "control got the start"
    assert order[1:] == [f"streaming {i}" for i in range(STREAMING)]


def test_an_error_in_the_thread_is_raised_in_the_caller():
    async def scenario():
        done = concurrent.futures.Future()
        threading.Thread(target=done.set_exception, args=(ValueError("broken"),)).start()
        with pytest.raises(ValueError, match="broken"):
            async with asyncio.timeout(GUARD_SEC):
                await wait_first(done)

    asyncio.run(scenario())


def test_a_cancelled_caller_is_cancelled_and_the_work_not_started_is_dropped():
    async def scenario():
        done = concurrent.futures.Future()
        waiting = asyncio.create_task(wait_first(done))
        await asyncio.sleep(0)
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        assert done.cancelled()
        # Work already running is not stopped: its result, arriving after the caller was
        # cancelled, changes nothing.
        running = concurrent.futures.Future()
        assert running.set_running_or_notify_cancel()
        other = asyncio.create_task(wait_first(running))
        await asyncio.sleep(0)
        other.cancel()
        with pytest.raises(asyncio.CancelledError):
            await other
        running.set_result("too late")
        await asyncio.sleep(0)

    asyncio.run(scenario())


def test_many_results_at_once_each_reach_their_caller():
    """Under a storm many starts come back together: every caller gets its own result."""

    async def scenario():
        count = settings.STORE_THREADS * 4
        results = await asyncio.gather(
            *(executors.in_pool_first("store", lambda i=i: i * i) for i in range(count)),
            *(executors.in_pool("control", lambda i=i: -i) for i in range(count)),
        )
        assert results == [i * i for i in range(count)] + [-i for i in range(count)]

    asyncio.run(scenario())
