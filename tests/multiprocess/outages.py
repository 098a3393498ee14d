"""What a test takes away and gives back (docs/design.md §32): a Redis server of its own, and a
TCP cut in front of PostgreSQL.

Never the machine's shared Redis or PostgreSQL: other suites use them. The Redis server runs
on a free port for one test and is stopped and started again on that port. PostgreSQL is
reached by the servers under test through `DatabaseCut`, a loopback relay the test cuts (every
open connection closed, new ones refused, as a stopped server does) and restores; the test
process itself keeps its direct connection, to read what was stored.
"""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
import threading
import time

import redis

from tests.helpers import GUARD_SEC
from tests.multiprocess.servers import free_port

REDIS_SERVER = shutil.which("redis-server")


class RedisServer:
    """`redis-server` on a port of its own, without persistence."""

    def __init__(self, port: int):
        self.port = port
        self.url = f"redis://127.0.0.1:{port}/0"
        self.process: subprocess.Popen | None = None

    def start(self) -> None:
        self.process = subprocess.Popen(
            [REDIS_SERVER, "--port", str(self.port), "--bind", "127.0.0.1"]
            + ["--save", "", "--appendonly", "no"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + GUARD_SEC
        while not self.answers():
            assert self.process.poll() is None, "redis-server exited"
            assert time.monotonic() < deadline, "redis-server did not start"
            time.sleep(0.02)

    def stop(self) -> None:
        """Gone at once, every client's connection with it (as a crash or a failover)."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=GUARD_SEC)

    def answers(self) -> bool:
        client = redis.Redis(port=self.port, socket_connect_timeout=1, socket_timeout=1)
        try:
            return bool(client.ping())
        except redis.RedisError:
            return False
        finally:
            client.close()


@contextlib.contextmanager
def redis_server():
    server = RedisServer(free_port())
    server.start()
    try:
        yield server
    finally:
        server.stop()


class DatabaseCut:
    """A relay from a loopback port to PostgreSQL that a test can cut and restore."""

    def __init__(self, upstream: tuple[str, int]):
        self.upstream = upstream
        self.port = free_port()
        self._lock = threading.Lock()
        self._open: set[socket.socket] = set()
        self._listener: socket.socket | None = None

    def restore(self) -> None:
        """Accept connections again (on the same port)."""
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(128)
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def cut(self) -> None:
        """Refuse new connections and close every open one, as a stopped server would."""
        listener, self._listener = self._listener, None
        if listener is not None:
            with contextlib.suppress(OSError):
                listener.shutdown(socket.SHUT_RDWR)
            listener.close()
        with self._lock:
            doomed, self._open = self._open, set()
        for sock in doomed:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return  # cut
            try:
                server = socket.create_connection(self.upstream, timeout=GUARD_SEC)
            except OSError:
                client.close()
                continue
            server.settimeout(None)
            with self._lock:
                if self._listener is not listener:
                    client.close()
                    server.close()
                    continue
                self._open.update((client, server))
            for source, target in ((client, server), (server, client)):
                threading.Thread(target=_pump, args=(source, target), daemon=True).start()


def _pump(source: socket.socket, target: socket.socket) -> None:
    try:
        while data := source.recv(65536):
            target.sendall(data)
    except OSError:
        pass
    finally:
        # Either side's end is the connection's end: both are closed (twice is harmless).
        for sock in (source, target):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()


@contextlib.contextmanager
def database_cut(host: str, port: int):
    cut = DatabaseCut((host, port))
    cut.restore()
    try:
        yield cut
    finally:
        cut.cut()
