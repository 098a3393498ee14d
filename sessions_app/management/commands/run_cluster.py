"""`make cluster`: a production-shaped deployment on this machine (docs/deploy.md).

Starts, each as a child process in a process group of its own:
- WORKERS Daphne workers (`manage.py serve`, which drains on SIGTERM) on consecutive ports;
- nginx in front of them, its config made from deploy/nginx.conf.template;
- the task worker (`db_worker`) and the idle-consolidation loop (`consolidate_memory`);
all on PostgreSQL (DATABASE_URL) and Redis (REDIS_URL), sharing one PROMETHEUS_MULTIPROC_DIR.

A worker that exits — drained after a SIGTERM, or crashed — is started again on its port:
that is how a rolling restart works (scripts/rolling_restart.py). So are the task worker and
the consolidation loop, which exit when the database goes away (scripts/failover_drill.py);
nginx exiting stops the cluster. Ctrl-C (or SIGTERM to this
process) drains every worker, then stops nginx and the rest. The run directory holds the
generated config, the logs and `cluster.json`, which names the proxy and each worker's pid.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import string
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from django.conf import settings
from django.core.management import call_command, get_commands
from django.core.management.base import BaseCommand, CommandError
from django.db import DatabaseError, connection

from jarvis_site.request_bodies import MULTIPART_ALLOWANCE
from jarvis_site.shared.metrics import process_gone

TEMPLATE = "deploy/nginx.conf.template"
POLL_SEC = 0.2
# A background process that exits is started again, at most once per this long.
RESTART_PAUSE_SEC = 2.0
# How long a starting worker may take before /readyz answers 200.
START_TIMEOUT_SEC = 60
INSTALL_HINT = {
    "nginx": "install it with `apt-get install -y nginx-light` (Debian, Ubuntu)",
    "database": "set DATABASE_URL=postgres://user@host:5432/dbname "
    "(a local server: `apt-get install -y postgresql`), then `manage.py migrate`",
    "redis": "set REDIS_URL=redis://127.0.0.1:6379/0 "
    "(a local server: `apt-get install -y redis-server`)",
}


class Command(BaseCommand):
    help = "Run nginx, WORKERS Daphne workers, the task worker and the consolidation loop."

    def add_arguments(self, parser):
        parser.add_argument("--workers", type=int, default=2)
        parser.add_argument("--port", type=int, default=8080, help="the proxy's port")
        parser.add_argument(
            "--first-worker-port", type=int, default=8101, help="workers use this port and up"
        )
        parser.add_argument("--run-dir", default=str(settings.VAR_DIR / "cluster"))
        parser.add_argument(
            "--check",
            action="store_true",
            help="only say whether nginx, PostgreSQL and Redis are there, and start nothing",
        )
        parser.add_argument(
            "--create-database",
            action="store_true",
            help="create DATABASE_URL's database when the server is there but the database is not",
        )

    def handle(
        self, *args, workers, port, first_worker_port, run_dir, check, create_database, **options
    ):
        if workers < 1:
            raise CommandError("--workers must be at least 1")
        nginx = self._requirements(create_database=create_database)
        if check:
            self.stdout.write(f"nginx ({nginx}), PostgreSQL and Redis are there.")
            return
        run_dir = Path(run_dir).resolve()
        metrics_dir = run_dir / "metrics"
        # Values of processes from an earlier run would be summed with this one's.
        shutil.rmtree(metrics_dir, ignore_errors=True)
        metrics_dir.mkdir(parents=True)
        self.run_dir = run_dir
        # The children write their metrics there; this process marks the stopped ones dead.
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = str(metrics_dir)
        self.env = dict(os.environ)
        self.manage = [sys.executable, str(settings.BASE_DIR / "manage.py")]
        self.proxy = f"http://127.0.0.1:{port}"

        call_command("migrate", "--noinput", verbosity=0)
        call_command("recover_deliveries", "--workers-stopped")
        if "retention_sweep" in get_commands():
            # The periodic retention sweep, run by the task worker (queued once; a no-op when
            # a run already waits).
            call_command("retention_sweep", "--schedule")
        ports = [first_worker_port + number for number in range(workers)]
        config = self._nginx_config(port, ports)
        stopping = []
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, lambda *_: stopping.append(True))
        self.workers: dict[int, subprocess.Popen] = {}
        self.others: dict[str, subprocess.Popen] = {}
        # How to start again the background processes that outlive their failures.
        self.restartable: dict[str, tuple[list[str], str]] = {}
        self.restarted_at: dict[str, float] = {}
        try:
            self._start_all(ports, nginx, config)
            for worker_port in ports:
                self._wait_ready(worker_port)
            self._write_state()
            self.stdout.write(
                f"Jarvis cluster: {self.proxy}/ in front of {workers} workers "
                f"(ports {ports[0]}-{ports[-1]}); logs in {run_dir}; Ctrl-C drains and stops it"
            )
            exit_code = self._supervise(stopping)
        finally:
            self._stop_all()
        if exit_code:
            sys.exit(exit_code)

    def _start_all(self, ports: list[int], nginx: str, config: Path) -> None:
        for worker_port in ports:
            self.workers[worker_port] = self._start_worker(worker_port)
        self.others["nginx"] = self._start(
            [nginx, "-p", str(self.run_dir), "-c", str(config)], "nginx"
        )
        idle_check_every = max(5, int(settings.CONSOLIDATE_IDLE_SEC // 3))
        # Both exit when the database goes away (a failover, a restart): they are started
        # again, as a service manager would, and the workers go on (docs/design.md §32).
        self.restartable = {
            "task worker": ([*self.manage, "db_worker", "--interval", "0.5"], "tasks"),
            "consolidation loop": (
                [*self.manage, "consolidate_memory", "--idle", "--loop", str(idle_check_every)],
                "consolidation",
            ),
        }
        for name, (command, log_name) in self.restartable.items():
            self.others[name] = self._start(command, log_name)

    # --- what must be there -----------------------------------------------------------
    def _requirements(self, *, create_database: bool = False) -> str:
        missing = []
        nginx = shutil.which("nginx") or shutil.which("nginx", path="/usr/sbin:/usr/local/sbin")
        if nginx is None:
            missing.append(f"nginx is not installed: {INSTALL_HINT['nginx']}")
        if settings.DATABASE_VENDOR != "postgresql":
            missing.append(f"the cluster needs PostgreSQL: {INSTALL_HINT['database']}")
        else:
            try:
                connection.ensure_connection()
            except DatabaseError as error:
                problem = self._database_missing(error, create=create_database)
                if problem:
                    missing.append(problem)
        if not settings.REDIS_URL:
            missing.append(f"the cluster needs Redis: {INSTALL_HINT['redis']}")
        else:
            # Loaded on first use: only this check needs redis-py directly (channels-redis
            # brings it), and a worker that imports the command module never calls it.
            import redis

            client = redis.Redis.from_url(settings.REDIS_URL, socket_connect_timeout=2)
            try:
                client.ping()
            except redis.RedisError as error:
                missing.append(f"Redis cannot be reached ({error}): check REDIS_URL")
            finally:
                client.close()
        if missing:
            raise CommandError("cannot start the cluster:\n- " + "\n- ".join(missing))
        return nginx

    def _database_missing(self, error: DatabaseError, *, create: bool) -> str | None:
        """What to say when DATABASE_URL's database cannot be opened; None once `create` made
        it. A fresh PostgreSQL server has no database of the name `make cluster` uses: the
        server's own `postgres` database tells a missing one from a server that is not there."""
        name = connection.settings_dict["NAME"]
        unreachable = f"PostgreSQL cannot be reached ({error}): check DATABASE_URL"
        try:
            with connection._nodb_cursor() as cursor:
                cursor.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name])
                if cursor.fetchone():
                    return unreachable
                if not create:
                    return (
                        f"the database {name} does not exist on the PostgreSQL server: "
                        "`manage.py run_cluster --check --create-database` creates it "
                        "(`make cluster` does)"
                    )
                cursor.execute(f"CREATE DATABASE {connection.ops.quote_name(name)}")
        except DatabaseError:
            return unreachable
        self.stdout.write(f"Created the database {name} on the PostgreSQL server.")
        return None

    def _nginx_config(self, port: int, worker_ports: list[int]) -> Path:
        template = string.Template((settings.BASE_DIR / TEMPLATE).read_text())
        config = template.safe_substitute(
            # nginx's workers drop root for `nobody`, who could not write the temp dirs here.
            USER_DIRECTIVE="user root;" if os.geteuid() == 0 else "",
            RUN_DIR=str(self.run_dir),
            LISTEN=f"127.0.0.1:{port}",
            # The same caps manage.py serve applies (jarvis_site.request_bodies), so that
            # nginx refuses what a worker would, before it reads it.
            BODY_MAX_BYTES=str(settings.DATA_UPLOAD_MAX_MEMORY_SIZE or 0),
            IMPORT_BODY_MAX_BYTES=str(settings.IMPORT_MAX_BYTES + MULTIPART_ALLOWANCE),
            UPLOAD_BODY_MAX_BYTES=str(settings.UPLOAD_MAX_BYTES + MULTIPART_ALLOWANCE),
            SIGNED_IN_BODY_MAX_BYTES=str(
                max(settings.IMPORT_MAX_BYTES, settings.UPLOAD_MAX_BYTES) + MULTIPART_ALLOWANCE
            ),
            UPSTREAM_SERVERS="\n".join(
                f"        server 127.0.0.1:{worker_port} max_fails=1 fail_timeout=2s;"
                for worker_port in worker_ports
            ),
        )
        path = self.run_dir / "nginx.conf"
        path.write_text(config)
        return path

    # --- children -----------------------------------------------------------------------
    def _start(self, command: list[str], log_name: str) -> subprocess.Popen:
        log = open(self.run_dir / f"{log_name}.log", "a")  # noqa: SIM115 - the child keeps it
        # A group of its own: Ctrl-C reaches this process only, which stops the children in
        # order (workers drain while nginx still carries their last events).
        return subprocess.Popen(
            command,
            cwd=settings.BASE_DIR,
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def _start_worker(self, port: int) -> subprocess.Popen:
        return self._start(
            [*self.manage, "serve", "--port", str(port), "--proxy-headers"], f"worker-{port}"
        )

    def _wait_ready(self, port: int) -> None:
        deadline = time.monotonic() + START_TIMEOUT_SEC
        while not _ready(f"http://127.0.0.1:{port}"):
            process = self.workers[port]
            if process.poll() is not None:
                raise CommandError(
                    f"the worker on port {port} exited with {process.returncode}; "
                    f"see {self.run_dir}/worker-{port}.log"
                )
            if time.monotonic() > deadline:
                raise CommandError(f"the worker on port {port} did not become ready")
            time.sleep(POLL_SEC)

    def _write_state(self) -> None:
        state = {
            "proxy": self.proxy,
            "supervisor": os.getpid(),
            "workers": {str(port): process.pid for port, process in self.workers.items()},
        }
        temporary = self.run_dir / "cluster.json.tmp"
        temporary.write_text(json.dumps(state, indent=2))
        temporary.replace(self.run_dir / "cluster.json")

    def _supervise(self, stopping: list) -> int:
        while not stopping:
            for name, process in list(self.others.items()):
                if process.poll() is None:
                    continue
                if name not in self.restartable:
                    self.stderr.write(f"{name} exited with code {process.returncode}; stopping")
                    return process.returncode or 1
                if time.monotonic() - self.restarted_at.get(name, -RESTART_PAUSE_SEC) < (
                    RESTART_PAUSE_SEC
                ):
                    continue  # it failed again at once: a pause before the next try
                self.stdout.write(
                    f"{name} exited with code {process.returncode}; starting it again"
                )
                self.restarted_at[name] = time.monotonic()
                self.others[name] = self._start(*self.restartable[name])
            for port, process in list(self.workers.items()):
                if process.poll() is None:
                    continue
                self.stdout.write(
                    f"worker on port {port} (pid {process.pid}) exited with code "
                    f"{process.returncode}; starting it again"
                )
                process_gone(process.pid)
                self.workers[port] = self._start_worker(port)
                self._wait_ready(port)
                self._write_state()
                self.stdout.write(f"worker on port {port} is back (pid {self.workers[port].pid})")
            time.sleep(POLL_SEC)
        return 0

    def _stop_all(self) -> None:
        """Drain the workers, then stop the proxy (gracefully) and the background processes."""
        self.stdout.write("stopping: draining the workers")
        workers = [process for process in self.workers.values() if process.poll() is None]
        for process in workers:
            process.send_signal(signal.SIGTERM)
        # A drain takes at most DRAIN_TIMEOUT_SEC plus its closing grace.
        _wait_all(workers, settings.DRAIN_TIMEOUT_SEC + 30)
        for process in workers:
            process_gone(process.pid)
        others = [process for process in self.others.values() if process.poll() is None]
        for name, process in self.others.items():
            if process.poll() is None:
                # SIGQUIT is nginx's graceful stop; the Django commands stop on SIGTERM.
                process.send_signal(signal.SIGQUIT if name == "nginx" else signal.SIGTERM)
        _wait_all(others, 15)
        (self.run_dir / "cluster.json").unlink(missing_ok=True)
        self.stdout.write("stopped")


def _ready(base: str) -> bool:
    try:
        with urllib.request.urlopen(f"{base}/readyz", timeout=5) as response:
            return response.status == 200
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return False


def _wait_all(processes: list[subprocess.Popen], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    for process in processes:
        try:
            process.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
