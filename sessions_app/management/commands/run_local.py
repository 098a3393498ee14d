"""Serve the web chat the way `make run` promises: Daphne plus the background workers.

Starts, as child processes of this one:
- Daphne on 127.0.0.1:8000 (HTTP + WebSockets) through `manage.py serve`, which lets a
  running turn finish when stopped;
- the task worker (`db_worker`) that runs memory consolidation, fires schedules and sends
  notices through their channels (Web Push, Discord, the webhook; before it starts, `recover_deliveries --workers-stopped`
  queues again what a worker killed last time was in the middle of);
- the idle-consolidation loop (`consolidate_memory --idle --loop`).
Ctrl-C (or SIGTERM) stops all of them; if one dies, the others are stopped too, so a
half-running install never looks healthy. Unless PROMETHEUS_MULTIPROC_DIR is set, they share
var/metrics/ (emptied at start), so /metrics shows all three.
"""

import os
import shutil
import signal
import subprocess
import sys
import time

from django.conf import settings
from django.core.management import call_command, get_commands
from django.core.management.base import BaseCommand


class Command(BaseCommand):
    help = "Run Daphne, the task worker and the consolidation loop for local use."

    def add_arguments(self, parser):
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--port", type=int, default=8000)

    def handle(self, *args, host, port, **options):
        manage = [sys.executable, str(settings.BASE_DIR / "manage.py")]
        call_command("recover_deliveries", "--workers-stopped")
        if "retention_sweep" in get_commands():
            # The periodic retention sweep, run by the task worker (queued once; a no-op when
            # a run already waits).
            call_command("retention_sweep", "--schedule")
        if not settings.PROMETHEUS_MULTIPROC_DIR:
            metrics_dir = settings.VAR_DIR / "metrics"
            shutil.rmtree(metrics_dir, ignore_errors=True)
            metrics_dir.mkdir()
            os.environ["PROMETHEUS_MULTIPROC_DIR"] = str(metrics_dir)
        programs = {
            "daphne": [*manage, "serve", "--bind", host, "--port", str(port)],
            # Polling twice a second: a reminder fires within half a second of its time.
            "task worker": [*manage, "db_worker", "--interval", "0.5"],
        }
        if "consolidate_memory" in get_commands():
            idle_check_every = max(5, int(settings.CONSOLIDATE_IDLE_SEC // 3))
            programs["consolidation loop"] = [
                *manage,
                "consolidate_memory",
                "--idle",
                "--loop",
                str(idle_check_every),
            ]
        # Each child in a session of its own: Ctrl-C reaches this process alone, which sends
        # each child one SIGTERM (a second one would cut Daphne's drain short).
        children = {
            name: subprocess.Popen(command, cwd=settings.BASE_DIR, start_new_session=True)
            for name, command in programs.items()
        }
        self.stdout.write(f"Jarvis is serving http://{host}:{port}/ (Ctrl-C stops it)")

        stopping = False

        def stop(*_):
            nonlocal stopping
            stopping = True

        signal.signal(signal.SIGTERM, stop)
        signal.signal(signal.SIGINT, stop)
        exit_code = 0
        while not stopping:
            for name, child in children.items():
                if child.poll() is not None:
                    self.stderr.write(f"{name} exited with code {child.returncode}; stopping")
                    exit_code = child.returncode or 1
                    stopping = True
            time.sleep(0.5)
        for child in children.values():
            if child.poll() is None:
                child.terminate()
        deadline = time.monotonic() + settings.DRAIN_TIMEOUT_SEC + 15
        for child in children.values():
            try:
                child.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                child.kill()
        sys.exit(exit_code)
