"""Channel-layer sends made from synchronous code go to the server's event loop
(runtime.loop.server_loop): in the order they were made, without the caller waiting, and in place
when no server loop runs."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Iterator

import pytest

from sessions_app.runtime.loop import server_loop
from tests.helpers import GUARD_SEC


class _Server:
    """An event loop in a thread of its own, noted as the process's serving loop."""

    def __init__(self):
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="server-loop")
        self.thread.start()
        asyncio.run_coroutine_threadsafe(self._serve(), self.loop).result(GUARD_SEC)

    async def _serve(self):
        server_loop.serve_on_this_loop()

    def run(self, coroutine):
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(GUARD_SEC)

    def stop(self):
        if self.loop.is_closed():
            return
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(GUARD_SEC)
        self.loop.close()


@pytest.fixture
def server() -> Iterator[_Server]:
    noted = list(server_loop._serving)
    running = _Server()
    try:
        yield running
    finally:
        running.stop()
        server_loop._serving[:] = noted


def test_sends_made_from_a_thread_run_on_the_server_loop_in_the_order_they_were_made(server):
    ran: list[tuple[str, str]] = []
    all_ran = threading.Event()

    async def make_gate():
        return asyncio.Event()

    gate = server.run(make_gate())

    async def slow_first():
        await gate.wait()  # a Redis send awaits between its steps
        ran.append(("first", threading.current_thread().name))

    async def second():
        ran.append(("second", threading.current_thread().name))
        all_ran.set()

    server_loop.send_soon(slow_first)
    server_loop.send_soon(second)
    # The caller went on: nothing has run while the first send waits.
    assert ran == []
    server.loop.call_soon_threadsafe(gate.set)
    assert all_ran.wait(GUARD_SEC)
    assert ran == [("first", "server-loop"), ("second", "server-loop")]


def test_a_send_that_fails_is_logged_and_the_next_one_still_goes(server, caplog):
    delivered = threading.Event()

    async def failing():
        raise RuntimeError("the layer is gone")

    async def fine():
        delivered.set()

    with caplog.at_level(logging.ERROR, logger="sessions_app.runtime.loop.server_loop"):
        server_loop.send_soon(failing)
        server_loop.send_soon(fine)
        assert delivered.wait(GUARD_SEC)
    assert any(
        record.exc_info and str(record.exc_info[1]) == "the layer is gone"
        for record in caplog.records
    )


def test_without_a_running_server_loop_the_send_runs_before_the_call_returns(server):
    server.stop()
    ran: list[str] = []

    async def send():
        ran.append(threading.current_thread().name)

    server_loop.send_soon(send)
    assert ran and ran[0] != "server-loop"
    assert server_loop.serving_loop() is None
