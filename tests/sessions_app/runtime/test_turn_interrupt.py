"""A turn's Stop cancels the model call where it waits, and only the Stop's own
cancellation is taken back: a task cancelled for any other reason (the server stopping it)
stays cancelled."""

import asyncio
import threading

import pytest

from sessions_app.runtime.tools import TurnAbort


async def wait_interruptibly(abort: TurnAbort, waiting: asyncio.Event) -> str:
    """What a model call does: wait inside `interrupting`, end as a Stop when it was one."""
    with abort.interrupting() as interrupt:
        try:
            waiting.set()
            await asyncio.Event().wait()  # a model that never sends its next piece
        except asyncio.CancelledError:
            if not interrupt.taken_back():
                raise
            return "stopped"
    return "answered"


async def started(abort: TurnAbort) -> asyncio.Task:
    waiting = asyncio.Event()
    task = asyncio.create_task(wait_interruptibly(abort, waiting))
    await waiting.wait()
    return task


def test_a_stop_on_the_loop_ends_the_wait_and_leaves_the_task_uncancelled():
    async def scenario():
        abort = TurnAbort()
        task = await started(abort)
        abort.set()
        assert await task == "stopped"
        assert task.cancelling() == 0

    asyncio.run(scenario())


def test_a_stop_from_another_thread_ends_the_wait():
    async def scenario():
        abort = TurnAbort()
        task = await started(abort)
        setter = threading.Thread(target=abort.set)
        setter.start()
        assert await task == "stopped"
        setter.join()

    asyncio.run(scenario())


def test_a_cancellation_that_is_not_a_stop_goes_on():
    async def scenario():
        task = await started(TurnAbort())
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(scenario())


def test_a_stop_and_another_cancellation_together_still_cancel():
    async def scenario():
        abort = TurnAbort()
        task = await started(abort)
        abort.set()
        task.cancel()  # the server stops the consumer at the same moment
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(scenario())


def test_a_stop_after_the_call_leaves_the_task_alone():
    async def scenario():
        abort = TurnAbort()
        with abort.interrupting():
            pass  # the model answered; the turn goes on to store it
        abort.set()
        await asyncio.sleep(0)  # a cancellation would land here
        return abort.is_set()

    assert asyncio.run(scenario()) is True


def test_a_stop_before_the_call_ends_it_at_its_first_wait():
    async def scenario():
        abort = TurnAbort()
        abort.set()  # between the turn's last look at the flag and its model call
        waiting = asyncio.Event()
        return await wait_interruptibly(abort, waiting)

    assert asyncio.run(scenario()) == "stopped"
