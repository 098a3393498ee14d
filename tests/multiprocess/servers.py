"""Real Daphne processes on loopback ports, serving the test database (tests/helpers.child_env)."""

from __future__ import annotations

import contextlib
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

from django.db import connection, connections

from tests.helpers import GUARD_SEC, REPO, child_env
from tests.parallel import free_ports

# libpq names the servers' database sessions, so shutdown can wait for exactly those.
APPLICATION_NAME = "jarvis-test-daphne"


def free_port() -> int:
    """A free port of this xdist worker's own (tests/parallel.py): never another worker's."""
    return free_ports(1)


class Server(str):
    """A server's base URL that also carries its process (to kill it in a crash test) and its
    output so far (`output()`: its log lines)."""

    process: subprocess.Popen
    log: tempfile.TemporaryFile

    def output(self) -> str:
        self.log.flush()
        self.log.seek(0)
        return self.log.read()


@contextlib.contextmanager
def daphne(
    port: int | None = None, *, serve: bool = False, daphne_args: tuple[str, ...] = (), **env
):
    """Run `daphne jarvis_site.asgi:application` on a loopback port (a free one unless given),
    with `daphne_args` added to its command line; yield its base URL (a `Server`). `serve`
    runs `manage.py serve` instead, the production command, which drains on SIGTERM."""
    port = port or free_port()
    log = tempfile.TemporaryFile("w+")
    if serve:
        command = [sys.executable, "manage.py", "serve", "--port", str(port)]
    else:
        command = [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port)]
        command += [*daphne_args, "jarvis_site.asgi:application"]
    process = subprocess.Popen(
        command,
        cwd=REPO,
        # Named by its port: a test with two servers waits, as each stops, for that server's
        # database sessions only, not for those of the server still running.
        env=child_env(
            ALLOWED_HOSTS="127.0.0.1,localhost", PGAPPNAME=f"{APPLICATION_NAME}-{port}", **env
        ),
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    base = Server(f"http://127.0.0.1:{port}")
    base.process = process
    base.log = log
    try:
        deadline = time.monotonic() + GUARD_SEC
        while True:
            if process.poll() is not None:
                log.seek(0)
                raise RuntimeError(f"daphne exited with {process.returncode}:\n{log.read()}")
            try:
                urllib.request.urlopen(base + "/accounts/login/", timeout=10).close()
                break
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                if time.monotonic() > deadline:
                    raise RuntimeError("daphne did not answer in time") from None
                time.sleep(0.2)
        yield base
    finally:
        if process.poll() is None:
            process.terminate()
        try:
            process.wait(timeout=GUARD_SEC)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=GUARD_SEC)
        log.close()
        _wait_for_its_database_sessions_to_end(f"{APPLICATION_NAME}-{port}")


def _wait_for_its_database_sessions_to_end(
    application_name: str = APPLICATION_NAME, timeout: float = GUARD_SEC
) -> None:
    """PostgreSQL notices a dead client's socket a moment after the process is gone; until
    then the test database cannot be dropped ("being accessed by other users").

    Runs in its own thread: a caller with an event loop set on its thread (Playwright's sync
    API) would get a connection of its own from Django that nothing closes.
    """
    if connection.vendor != "postgresql":
        return

    def wait():
        deadline = time.monotonic() + timeout
        try:
            while time.monotonic() < deadline:
                with connections["default"].cursor() as cursor:
                    cursor.execute(
                        "SELECT count(*) FROM pg_stat_activity "
                        "WHERE datname = current_database() AND application_name = %s",
                        [application_name],
                    )
                    if cursor.fetchone()[0] == 0:
                        return
                time.sleep(0.05)
        finally:
            connections.close_all()

    waiter = threading.Thread(target=wait)
    waiter.start()
    waiter.join(timeout + 5)
