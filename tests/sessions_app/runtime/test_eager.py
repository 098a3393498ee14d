"""A task whose first step runs in the call that starts it (sessions_app.runtime.loop.eager):
a new turn's store request, a model request and its body do not wait for a pass of a busy
event loop (docs/design.md §26)."""

import asyncio
import contextvars

import pytest

from sessions_app.runtime.loop.eager import Spacing, start_task, started_at_once

NOTE = contextvars.ContextVar("note", default="")


def test_the_first_step_has_run_when_the_task_is_returned():
    async def main():
        steps: list[str] = []
        gate = asyncio.get_running_loop().create_future()

        async def work():
            steps.append("first")
            NOTE.set("set in the first step")
            value = await gate
            steps.append(f"then {value}")
            return NOTE.get()

        task = start_task(work())
        assert steps == ["first"]  # before any await of the caller
        gate.set_result("released")
        assert await task == "set in the first step"  # the task's context, not the caller's
        assert NOTE.get() == ""
        assert steps == ["first", "then released"]

    asyncio.run(main())


def test_the_task_is_the_current_task_in_its_first_step_and_the_caller_is_again_after():
    async def main():
        seen = {}

        async def work():
            seen["current"] = asyncio.current_task()
            async with asyncio.timeout(5):  # needs the task it runs in
                await asyncio.sleep(0)

        caller = asyncio.current_task()
        task = start_task(work())
        assert seen["current"] is task
        assert asyncio.current_task() is caller
        await task

    asyncio.run(main())


def test_a_first_step_that_ends_or_fails_is_the_tasks_outcome():
    async def main():
        async def answers():
            return 42

        async def fails():
            raise ValueError("bad input")

        assert await start_task(answers()) == 42
        failing = start_task(fails())
        with pytest.raises(ValueError, match="bad input"):
            await failing

    asyncio.run(main())


def test_a_task_cancelled_before_it_took_over_its_wait_cancels_what_it_waited_on():
    async def main():
        gate = asyncio.get_running_loop().create_future()
        unwound = []

        async def work():
            try:
                await gate
            finally:
                unwound.append(True)

        task = start_task(work())
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert unwound == [True]
        assert gate.cancelled()

    asyncio.run(main())


def test_a_loops_factory_starts_only_the_named_coroutines_at_once():
    async def main():
        steps: list[str] = []

        async def eager():
            steps.append("eager")

        async def plain():
            steps.append("plain")

        loop = asyncio.get_running_loop()
        started_at_once(loop, eager)
        first = loop.create_task(eager())
        second = loop.create_task(plain())
        assert steps == ["eager"]
        await asyncio.gather(first, second)
        assert steps == ["eager", "plain"]

    asyncio.run(main())


def test_a_loop_with_a_factory_of_its_own_keeps_it():
    async def main():
        loop = asyncio.get_running_loop()

        def own(loop, coro, context=None):
            return asyncio.Task(coro, loop=loop, context=context)

        loop.set_task_factory(own)
        started_at_once(loop, test_a_loop_with_a_factory_of_its_own_keeps_it)
        assert loop.get_task_factory() is own

    asyncio.run(main())


def test_spacing_says_yes_once_per_interval():
    spacing = Spacing(0.05)
    assert spacing.take(10.0)
    assert not spacing.take(10.01)
    assert not spacing.take(10.049)
    assert spacing.take(10.05)
