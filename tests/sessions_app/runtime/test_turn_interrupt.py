"""A turn's Stop ends its model call at once (docs/design.md §26): the turn goes on with the
answer so far, ahead of the loop's waiting work, while the call is cancelled and unwinds by
itself — a request cancelled mid-way awaits its own clean-up, and the turn must not."""

import asyncio
import threading

import pytest

from sessions_app.runtime.tools.base import TurnAbort
from tests.helpers import GUARD_SEC

STREAMING = 3  # callbacks of streaming turns already waiting when the Stop arrives


class ModelCall:
    """A model that never sends its next piece, and whose cancelled request takes its time
    to clean up (until `cleaned_up_may_end` is set)."""

    def __init__(self):
        self.waiting = asyncio.Event()
        self.cleaning_up = asyncio.Event()
        self.cleaned_up_may_end = asyncio.Event()
        self.cleaned_up = False

    async def __call__(self) -> str:
        self.waiting.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.cleaning_up.set()
            await self.cleaned_up_may_end.wait()  # a connection closing, a pass at a time
            self.cleaned_up = True
            raise
        return "answered"


async def racing(abort: TurnAbort, call: ModelCall) -> asyncio.Task:
    task = asyncio.create_task(abort.race(call()))
    await call.waiting.wait()
    return task


def test_a_stop_ends_the_call_without_waiting_for_its_clean_up():
    async def scenario():
        abort, call = TurnAbort(), ModelCall()
        task = await racing(abort, call)
        abort.set()
        async with asyncio.timeout(GUARD_SEC):
            assert await task == (True, None)
            await call.cleaning_up.wait()
        assert not call.cleaned_up  # the turn went on while the request still cleaned up
        call.cleaned_up_may_end.set()
        for _ in range(3):
            await asyncio.sleep(0)
        assert call.cleaned_up

    asyncio.run(scenario())


def test_a_stop_from_another_thread_ends_the_call():
    async def scenario():
        abort, call = TurnAbort(), ModelCall()
        task = await racing(abort, call)
        setter = threading.Thread(target=abort.set)
        setter.start()
        async with asyncio.timeout(GUARD_SEC):
            assert await task == (True, None)
        setter.join(GUARD_SEC)
        call.cleaned_up_may_end.set()

    asyncio.run(scenario())


def test_the_turn_resumes_ahead_of_the_waiting_callbacks():
    """A Stop read on the loop (in the server's read of the frame): the turn goes on before
    the streamed pieces already waiting, not after them."""
    ran: list[str] = []

    async def scenario():
        loop = asyncio.get_running_loop()
        abort, call = TurnAbort(), ModelCall()

        async def turn():
            await abort.race(call())
            ran.append("turn goes on")

        task = asyncio.create_task(turn())
        await call.waiting.wait()

        def a_pass_with_a_stop():
            for index in range(STREAMING):
                loop.call_soon(ran.append, f"streaming {index}")
            abort.set()

        loop.call_soon(a_pass_with_a_stop)
        async with asyncio.timeout(GUARD_SEC):
            await task
        call.cleaned_up_may_end.set()
        await asyncio.sleep(0)

    asyncio.run(scenario())
    assert ran == ["turn goes on"] + [f"streaming {i}" for i in range(STREAMING)]


def test_a_stop_before_the_call_ends_it_before_it_starts():
    async def scenario():
        abort = TurnAbort()
        abort.set()  # between the turn's last look at the flag and its model call
        call = ModelCall()
        assert await abort.race(call()) == (True, None)
        await asyncio.sleep(0)
        return call.waiting.is_set()

    assert asyncio.run(scenario()) is False


def test_a_call_that_ends_first_is_the_outcome_and_a_later_stop_changes_nothing():
    async def scenario():
        abort = TurnAbort()

        async def answered():
            await asyncio.sleep(0)
            return "the answer"

        outcome = await abort.race(answered())
        abort.set()  # the turn goes on to store the answer
        await asyncio.sleep(0)  # a cancellation would land here
        return outcome

    assert asyncio.run(scenario()) == (False, "the answer")


def test_the_calls_error_is_the_callers():
    async def scenario():
        async def failed():
            await asyncio.sleep(0)
            raise ValueError("the provider refused")

        with pytest.raises(ValueError, match="refused"):
            await TurnAbort().race(failed())

    asyncio.run(scenario())


def test_cancelling_the_caller_cancels_the_call():
    async def scenario():
        abort, call = TurnAbort(), ModelCall()
        task = await racing(abort, call)
        task.cancel()  # the server stops the consumer
        with pytest.raises(asyncio.CancelledError):
            await task
        async with asyncio.timeout(GUARD_SEC):
            await call.cleaning_up.wait()
        call.cleaned_up_may_end.set()

    asyncio.run(scenario())
