"""A WebSocket's frame is read as it arrives, not at the event loop's next pass (docs/design.md
§26): a watcher thread puts the loop's own read of the socket at the front of its queue."""

import asyncio
import functools
import socket
import threading
from types import SimpleNamespace

import pytest

from sessions_app.runtime.loop import read_first
from tests.helpers import GUARD_SEC

STREAMING = 3  # callbacks of streaming turns already waiting when the frame arrives

pytestmark = pytest.mark.skipif(not hasattr(read_first.select, "epoll"), reason="Linux only")


@pytest.fixture
def front_reads(monkeypatch) -> threading.Event:
    """Set once the watcher has put a read at the front of the loop's queue."""
    queued = threading.Event()
    put_first = read_first.call_first_threadsafe

    def noted(loop, callback, *args):
        put_first(loop, callback, *args)
        queued.set()

    monkeypatch.setattr(read_first, "call_first_threadsafe", noted)
    return queued


def run_with_a_socket(scenario) -> None:
    """`scenario(loop, server_side, client_side, watcher)` on a fresh loop; the server side
    is read by the loop, as Twisted reads a connection."""

    async def main():
        loop = asyncio.get_running_loop()
        server_side, client_side = socket.socketpair()
        server_side.setblocking(False)
        watcher = read_first._watcher_for(loop)
        try:
            await scenario(loop, server_side, client_side, watcher)
        finally:
            loop.remove_reader(server_side.fileno())
            server_side.close()
            client_side.close()

    asyncio.run(main())


def read_and_watched(loop, server_side, watcher, into: list) -> tuple[asyncio.Event, object]:
    """The loop reads the server side into `into` (the event set at each read), and the
    watcher watches it; returns the event and the watching connection."""
    arrived = asyncio.Event()

    def read():
        into.append(server_side.recv(100))
        arrived.set()

    loop.add_reader(server_side.fileno(), read)
    watcher.watch(server_side.fileno(), owner := object())
    return arrived, owner


def test_a_frame_is_read_before_the_rest_of_the_pass(front_reads):
    ran: list = []

    async def scenario(loop, server_side, client_side, watcher):
        done, owner = read_and_watched(loop, server_side, watcher, ran)

        def a_long_pass():
            for index in range(STREAMING):
                loop.call_soon(ran.append, f"streaming {index}")
            client_side.send(b'{"type": "abort"}')
            assert front_reads.wait(GUARD_SEC)  # the watcher saw it while the pass runs

        loop.call_soon(a_long_pass)
        async with asyncio.timeout(GUARD_SEC):
            await done.wait()
        await asyncio.sleep(0)
        watcher.forget(server_side.fileno(), owner)

    run_with_a_socket(scenario)
    assert ran == [b'{"type": "abort"}'] + [f"streaming {i}" for i in range(STREAMING)]


def test_the_socket_is_watched_again_while_the_pass_goes_on(front_reads, monkeypatch):
    # A pass that never ends while frames come (a burst's starts keep going ahead of it):
    # each frame is still read at the front, the second after the first's read.
    monkeypatch.setattr(read_first, "REARM_SEC", 0.0)
    ran: list = []

    async def scenario(loop, server_side, client_side, watcher):
        arrived, owner = read_and_watched(loop, server_side, watcher, ran)

        def frame_arrives(frame):
            # The loop is busy when the frame arrives: only the watcher can see it now.
            front_reads.clear()
            client_side.send(frame)
            assert front_reads.wait(GUARD_SEC)

        for frame in (b"one", b"two"):
            loop.call_soon(frame_arrives, frame)
        loop.call_soon(ran.append, "the rest of the pass")
        async with asyncio.timeout(GUARD_SEC):
            while len(ran) < 3:
                arrived.clear()
                await arrived.wait()
        watcher.forget(server_side.fileno(), owner)

    run_with_a_socket(scenario)
    assert ran == [b"one", b"two", "the rest of the pass"]


def test_a_socket_the_loop_no_longer_reads_is_left_alone(front_reads):
    async def scenario(loop, server_side, client_side, watcher):
        fd = server_side.fileno()
        loop.add_reader(fd, lambda: pytest.fail("read after the server paused its reading"))
        watcher.watch(fd, object())
        loop.remove_reader(fd)  # the server pauses reading this connection
        client_side.send(b"held")
        assert await asyncio.to_thread(front_reads.wait, GUARD_SEC)
        front_reads.clear()
        for _ in range(20):
            await asyncio.sleep(0)
        # Not watched again while its data waits: no read, no spinning thread.
        assert not front_reads.is_set()

    run_with_a_socket(scenario)


def test_only_the_connection_that_watches_a_number_forgets_it():
    async def scenario(loop, server_side, client_side, watcher):
        fd = server_side.fileno()
        closed_connection, new_connection = object(), object()
        watcher.watch(fd, closed_connection)
        watcher.watch(fd, new_connection)  # the number went to a new connection
        watcher.forget(fd, closed_connection)  # the closed one's application ends late
        assert watcher.owners[fd] is new_connection
        watcher.forget(fd, new_connection)
        assert fd not in watcher.owners

    run_with_a_socket(scenario)


def test_only_daphnes_tcp_connections_are_watched():
    class Protocol:
        transport = SimpleNamespace(fileno=lambda: 7)  # TLS, another server's, a test's

    def handle_reply(protocol, message):
        pass

    assert read_first.socket_fd_for(functools.partial(handle_reply, Protocol())) is None
    assert read_first.socket_fd_for(handle_reply) is None


def test_the_watcher_ends_with_its_loop(monkeypatch):
    monkeypatch.setattr(read_first, "CLOSED_LOOK_SEC", 0.01)
    watchers = []

    async def serve():
        watchers.append(read_first._watcher_for(asyncio.get_running_loop()))

    asyncio.run(serve())  # the loop closes
    watchers[0].thread.join(GUARD_SEC)
    assert not watchers[0].thread.is_alive()
