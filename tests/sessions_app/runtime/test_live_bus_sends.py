"""The live bus writes a command in the step that asks for it (docs/design.md §26). redis-py
sends under asyncio.wait_for when a connection has a socket timeout, and on Python 3.11 that
is a task of its own: three passes of a busy event loop before the first byte, which made a
Stop to another worker wait most of a second under a storm. The publisher's commands are
still bounded in time."""

import asyncio
import contextlib
import socket
import threading

import pytest

from sessions_app.runtime.live import live_bus
from sessions_app.runtime.loop.eager import start_task
from tests.helpers import GUARD_SEC
from tests.sessions_app.runtime.test_live_bus_control_lane import _closed

pytestmark = pytest.mark.anyio

HELLO_REPLY = b"%2\r\n$6\r\nserver\r\n$5\r\nredis\r\n$5\r\nproto\r\n:3\r\n"


def _commands(buffer: bytearray) -> list[list[bytes]]:
    """The complete RESP commands at the start of `buffer`, taken out of it."""
    commands = []
    while True:
        try:
            header_end = buffer.index(b"\r\n")
            count, at, parts = int(buffer[1:header_end]), header_end + 2, []
            for _ in range(count):
                length_end = buffer.index(b"\r\n", at)
                length = int(buffer[at + 1 : length_end])
                start = length_end + 2
                if len(buffer) < start + length + 2:
                    return commands
                parts.append(bytes(buffer[start : start + length]))
                at = start + length + 2
        except ValueError:  # no complete line yet
            return commands
        del buffer[:at]
        commands.append(parts)


class SilentRedis:
    """A Redis that shakes hands, answers the PUBLISHes of the warm-up Stop, and never answers
    another one. It reads in threads of its own, so it sees what a client wrote even while
    the client's event loop is blocked."""

    def __init__(self):
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"redis://127.0.0.1:{self.listener.getsockname()[1]}/0"
        self.unanswered: list[bytes] = []  # the channels of the PUBLISHes after the warm-up
        self.arrived = threading.Condition()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return  # closed
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket):
        # A client that gives up on its PUBLISH drops the connection: that ends this reader.
        with client, contextlib.suppress(ConnectionError):
            self._answer(client)

    def _answer(self, client: socket.socket):
        buffer = bytearray()
        while data := client.recv(65536):
            buffer += data
            for name, *arguments in _commands(buffer):
                if name == b"HELLO":
                    client.sendall(HELLO_REPLY)
                elif name == b"CLIENT":
                    client.sendall(b"+OK\r\n")
                elif name == b"PUBLISH" and b"warm-up" in arguments[0]:
                    client.sendall(b":0\r\n")
                elif name == b"PUBLISH":
                    with self.arrived:
                        self.unanswered.append(arguments[0])
                        self.arrived.notify_all()
                # Anything else (the reply channel's SUBSCRIBE) is left unanswered.

    def unanswered_reach(self, count: int) -> bool:
        """Block this thread until `count` PUBLISHes wait for an answer (False after
        GUARD_SEC): a test's event loop stays where it is meanwhile."""
        with self.arrived:
            return self.arrived.wait_for(lambda: len(self.unanswered) >= count, GUARD_SEC)

    def close(self):
        self.listener.close()


@pytest.fixture
def silent_redis():
    server = SilentRedis()
    yield server
    server.close()


async def test_a_stop_is_on_the_wire_before_the_event_loop_runs_anything_else(silent_redis):
    bus = live_bus.LiveBus(silent_redis.url)
    try:
        async with asyncio.timeout(GUARD_SEC):
            assert not await bus.abort("warm-up")  # connected; no worker ran that turn
        stop = start_task(bus.abort("a-turn-elsewhere"))
        # The loop is blocked here: only a PUBLISH written in the step above can arrive.
        arrived = silent_redis.unanswered_reach(1)
        stop.cancel()
        await asyncio.gather(stop, return_exceptions=True)
        assert arrived, "the Stop's PUBLISH waited for the event loop"
        assert silent_redis.unanswered == [live_bus.control_channel("a-turn-elsewhere").encode()]
    finally:
        await _closed(bus)


async def test_a_publish_redis_never_answers_ends_within_the_socket_timeout(silent_redis, settings):
    settings.REDIS_SOCKET_TIMEOUT_SEC = 0.2
    bus = live_bus.LiveBus(silent_redis.url)
    try:
        async with asyncio.timeout(GUARD_SEC):
            await bus.abort("warm-up")
        stop = asyncio.ensure_future(bus.abort("a-turn-elsewhere"))
        done, _ = await asyncio.wait({stop}, timeout=GUARD_SEC)
        assert stop in done, "a PUBLISH without an answer held its caller for ever"
        # Reached nobody, as far as it knows: the lease's mark stops the turn (§32).
        assert stop.result() is False
    finally:
        await _closed(bus)


async def test_a_turns_end_leaves_in_the_step_that_queues_it_though_no_count_came_back(
    silent_redis,
):
    # A turn's end used to wait for the publish loop's next pass, and that loop for the
    # counts of the batch before it: a pass of a busy loop each (docs/performance.md).
    bus = live_bus.LiveBus(silent_redis.url)
    delta = '{"type": "delta", "event_seq": 1}'
    end = '{"type": "agent_end", "status": "aborted", "event_seq": 2}'
    try:
        async with asyncio.timeout(GUARD_SEC):
            assert not await bus.abort("warm-up")  # connected
            bus.publish_event("a-session", "turn_1", 1, delta)
            while not silent_redis.unanswered:
                await asyncio.sleep(0)  # the publish loop writes it; no count comes back
        bus.publish_event("a-session", "turn_1", 2, end)
        # The loop is blocked here: only a write made in the call above can arrive.
        assert silent_redis.unanswered_reach(2), "the turn's end waited for the event loop"
        assert silent_redis.unanswered == [live_bus.events_channel("a-session").encode()] * 2
    finally:
        await _closed(bus)
