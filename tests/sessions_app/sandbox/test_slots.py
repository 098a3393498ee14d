"""docs/design.md §28: SANDBOX_CONCURRENCY runs at once per worker; the others wait, holding
no thread, in order, and a Stop ends a wait at once."""

import asyncio

import pytest

from sessions_app.runtime.sandbox.slots import RunSlots
from sessions_app.runtime.tools.base import TurnAbort
from tests.sessions_app.web.consumers.conftest import anyio_backend  # noqa: F401 - a fixture

pytestmark = pytest.mark.anyio


async def waiting(task: asyncio.Task) -> bool:
    """Whether the task is parked (it had its turns of the loop and has not finished)."""
    for _ in range(3):
        await asyncio.sleep(0)
    return not task.done()


async def test_a_run_waits_for_a_free_slot_and_a_stop_ends_the_wait(settings):
    settings.SANDBOX_CONCURRENCY = 1
    slots = RunSlots()
    assert await slots.acquire(TurnAbort())
    second_abort, third_abort = TurnAbort(), TurnAbort()
    second = asyncio.create_task(slots.acquire(second_abort))
    third = asyncio.create_task(slots.acquire(third_abort))
    assert await waiting(second) and await waiting(third)

    third_abort.set()
    assert await third is False, "a stopped run gives up its place"
    assert await waiting(second)

    slots.release()
    assert await second is True
    fourth = asyncio.create_task(slots.acquire(TurnAbort()))
    assert await waiting(fourth)
    slots.release()
    assert await fourth is True
    slots.release()
    assert await slots.acquire(TurnAbort()), "every slot came back"
