"""Schedule fixtures: the real task worker run in a thread, a real webhook receiver."""

import json
import threading
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from django.db import connections
from django.utils import timezone
from django_tasks_db.management.commands.db_worker import Worker
from django_tasks_db.models import DBTaskResult

from notices_app.delivery import notice_fan_out
from notices_app.models import Schedule
from tests.helpers import GUARD_SEC, eventually


def worker(worker_id: str = "test-worker") -> Worker:
    """`manage.py db_worker --batch` as an object: runs every due task, then returns."""
    return Worker(
        queue_names=["default"],
        interval=0,
        batch=True,
        backend_name="default",
        startup_delay=False,
        max_tasks=None,
        worker_id=worker_id,
        excluded_queue_names=[],
    )


def run_due_tasks() -> None:
    """Run the tasks that are due now, in a thread with its own connection, as a worker would."""
    thread = threading.Thread(target=_run_once)
    thread.start()
    thread.join(GUARD_SEC)
    assert not thread.is_alive(), "the worker is stuck"


def _run_once():
    try:
        worker().run()
    finally:
        connections.close_all()


def fan_out_notices() -> None:
    """Run the queued fan-outs of new notices here, as the worker would, and nothing else:
    each notice's outbox rows exist afterwards, their sends still queued, for a test that
    makes each attempt itself."""
    for queued in ready_tasks("fan_out_notice"):
        notice_fan_out(
            **dict(
                zip(
                    ("session_id", "message_id", "content", "created_at"),
                    queued.args_kwargs["args"],
                    strict=True,
                )
            )
        )
        queued.delete()


def run_worker_until(predicate) -> None:
    """Run the worker until `predicate()` holds: for runs whose time is still ahead (a retry's
    back-off), so what is awaited is that time, not another party."""

    def ran_and_holds():
        run_due_tasks()
        return predicate()

    eventually(ran_and_holds, what="the worker got there", interval=0.02)


def ready_tasks(task_name: str) -> list[DBTaskResult]:
    return [
        row
        for row in DBTaskResult.objects.filter(status="READY")
        if row.task_path.endswith("." + task_name)
    ]


class Receiver:
    """A real HTTP server on 127.0.0.1 recording each POST; it fails the first `failures`."""

    def __init__(self, failures: int = 0):
        self.posts: list[dict] = []
        self.failures = failures
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                if receiver.failures > 0:
                    receiver.failures -= 1
                    self.send_response(503)
                    self.end_headers()
                    return
                receiver.posts.append(
                    {
                        "body": json.loads(body),
                        "content_type": self.headers["Content-Type"],
                        "idempotency_key": self.headers["Idempotency-Key"],
                    }
                )
                self.send_response(204)
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.host = f"127.0.0.1:{self.server.server_address[1]}"
        self.url = f"http://{self.host}/notices"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def let_send_to(settings, receiver: Receiver) -> None:
    """The operator's webhook pointed at `receiver`, a plain-http server on loopback: allowed
    by OUTBOUND_ALLOW_HTTP and by naming its host and port on OUTBOUND_URL_ALLOWLIST."""
    settings.OUTBOUND_ALLOW_HTTP = True
    settings.OUTBOUND_URL_ALLOWLIST = [*settings.OUTBOUND_URL_ALLOWLIST, receiver.host]
    settings.NOTIFY_WEBHOOK_URL = receiver.url


@pytest.fixture
def receiver(settings):
    receiver = Receiver()
    let_send_to(settings, receiver)
    settings.NOTIFY_RETRY_BASE_SEC = 0.05
    yield receiver
    receiver.close()


def make_due(schedule: Schedule, *, ago: timedelta = timedelta(0)) -> None:
    """Move a schedule's waiting run (and its queued task) to `ago` before now."""
    run_at = timezone.now() - ago
    DBTaskResult.objects.filter(id=schedule.task_id).update(
        run_after=run_at,
        args_kwargs={"args": [schedule.id, run_at.isoformat()], "kwargs": {}},
    )
    Schedule.objects.filter(id=schedule.id).update(next_run_at=run_at, first_run_at=run_at)
    schedule.refresh_from_db()
