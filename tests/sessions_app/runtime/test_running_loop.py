"""running_loop answers what asyncio.get_running_loop answers, in every thread and loop."""

import asyncio
import threading

import pytest

from sessions_app.runtime.loop.running import running_loop


async def _both() -> tuple:
    return running_loop(), asyncio.get_running_loop()


def test_it_is_the_running_loop_and_a_new_loop_replaces_the_old():
    for _ in range(2):  # the second loop runs in the thread the first ran in
        found, running = asyncio.run(_both())
        assert found is running


def test_outside_a_running_loop_it_refuses_as_asyncio_does():
    asyncio.run(_both())  # a loop was found last in this thread, and has ended
    with pytest.raises(RuntimeError):
        running_loop()


def test_two_threads_each_get_their_own_loop_while_both_run():
    both_running = threading.Barrier(2)
    found = {}

    async def ask(name):
        both_running.wait()
        for _ in range(3):  # asked in turns with the other thread
            found.setdefault(name, []).append(running_loop() is asyncio.get_running_loop())
            await asyncio.sleep(0)

    threads = [threading.Thread(target=asyncio.run, args=(ask(name),)) for name in "ab"]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert found == {"a": [True] * 3, "b": [True] * 3}
