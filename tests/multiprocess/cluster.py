"""`manage.py run_cluster` (what `make cluster` runs) on the test database, for tests that go
through its proxy: nginx in front of draining Daphne workers, on PostgreSQL and Redis."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import GUARD_SEC, REPO, child_env, eventually
from tests.multiprocess.redis_layer import TEST_REDIS_URL
from tests.multiprocess.servers import (
    APPLICATION_NAME,
    _wait_for_its_database_sessions_to_end,
    free_port,
)
from tests.parallel import free_ports

NGINX = shutil.which("nginx") or shutil.which("nginx", path="/usr/sbin:/usr/local/sbin")
requires_nginx = pytest.mark.skipif(
    NGINX is None, reason="nginx is not installed (apt-get install -y nginx-light)"
)


class Cluster:
    def __init__(self, process: subprocess.Popen, run_dir: Path, proxy: str):
        self.process = process
        self.run_dir = run_dir
        self.proxy = proxy

    def state(self) -> dict:
        """cluster.json: the proxy and each worker's pid (written once they are all ready)."""
        path = self.run_dir / "cluster.json"
        return json.loads(path.read_text()) if path.exists() else {}

    def restart_worker(self, port: str) -> None:
        """SIGTERM one worker; return once its replacement is ready."""
        old = self.state()["workers"][port]
        os.kill(old, signal.SIGTERM)
        eventually(
            lambda: self.state().get("workers", {}).get(port) not in (None, old),
            what=f"the worker on port {port} is back",
        )


@contextlib.contextmanager
def cluster(tmp_path: Path, workers: int = 2, **env):
    run_dir = tmp_path / "cluster"
    port = free_port()
    first = free_ports(workers)  # the cluster numbers its workers' ports from the first
    command = [sys.executable, "manage.py", "run_cluster", "--workers", str(workers)]
    command += ["--port", str(port), "--first-worker-port", str(first), "--run-dir", str(run_dir)]
    output = (tmp_path / "cluster.out").open("w+")
    process = subprocess.Popen(
        command,
        cwd=REPO,
        env=child_env(REDIS_URL=TEST_REDIS_URL, PGAPPNAME=APPLICATION_NAME, **env),
        stdout=output,
        stderr=subprocess.STDOUT,
    )
    running = Cluster(process, run_dir, f"http://127.0.0.1:{port}")
    try:
        eventually(lambda: process.poll() is not None or running.state(), what="cluster ready")
        if process.poll() is not None:
            output.seek(0)
            raise RuntimeError(f"the cluster exited with {process.returncode}:\n{output.read()}")
        yield running
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)  # as Ctrl-C: drain, then stop everything
        try:
            process.wait(timeout=GUARD_SEC)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        output.close()
        _wait_for_its_database_sessions_to_end()
