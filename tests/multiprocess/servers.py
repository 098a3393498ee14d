"""Real Daphne processes on loopback ports, serving the test database (tests/helpers.child_env)."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

from tests.helpers import REPO, child_env

STARTUP_TIMEOUT_SEC = 30


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextlib.contextmanager
def daphne(**env):
    """Run `daphne jarvis_site.asgi:application` on a free loopback port; yield its base URL."""
    port = free_port()
    log = tempfile.TemporaryFile("w+")
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "daphne",
            "-b",
            "127.0.0.1",
            "-p",
            str(port),
            "jarvis_site.asgi:application",
        ],
        cwd=REPO,
        env=child_env(ALLOWED_HOSTS="127.0.0.1,localhost", **env),
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + STARTUP_TIMEOUT_SEC
        while True:
            if process.poll() is not None:
                log.seek(0)
                raise RuntimeError(f"daphne exited with {process.returncode}:\n{log.read()}")
            try:
                urllib.request.urlopen(base + "/accounts/login/", timeout=2).close()
                break
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                if time.monotonic() > deadline:
                    raise RuntimeError("daphne did not answer in time") from None
                time.sleep(0.2)
        yield base
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=5)
        log.close()
