"""Worker heartbeats: a server process that dies is noticed within WORKER_DEAD_SEC.

Every Daphne worker starts `heartbeat_start()` (jarvis_site.asgi). A thread of its own
renews the process's `Worker` row every WORKER_DEAD_SEC / 4 seconds, so a busy event loop
never makes a live worker look dead. Connections and turn leases name their worker; once
the worker's row is older than WORKER_DEAD_SEC they count as gone — on this machine or any
other, which a process-id check cannot tell.

A process that never started a heartbeat (a management command, a test) has no row; its
connections and leases fall back to their own expiry.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from datetime import timedelta

from django.conf import settings
from django.db import DatabaseError, connection
from django.utils import timezone

from sessions_app.models import Worker

logger = logging.getLogger(__name__)

_HOST = socket.gethostname().replace(":", "-")[:24]
_ids: dict[int, str] = {}
_started: set[int] = set()
_start_lock = threading.Lock()
# Run after every beat (registered in an AppConfig.ready): periodic work each server process
# does whether or not it serves anything now, such as running queues a dead worker left.
_beat_hooks: list = []


def heartbeat_hook_register(hook) -> None:
    """Have the heartbeat thread call `hook()` after each beat (registering again is harmless).
    A hook keeps its own pace and hands long work to another thread: beats must not wait."""
    if hook not in _beat_hooks:
        _beat_hooks.append(hook)


def current_worker_id() -> str:
    """`host:pid:boot` of this process; a forked child gets an id of its own."""
    pid = os.getpid()
    worker_id = _ids.get(pid)
    if worker_id is None:
        worker_id = _ids[pid] = f"{_HOST}:{pid}:{uuid.uuid4().hex[:8]}"
    return worker_id


def dead_cutoff():
    return timezone.now() - timedelta(seconds=settings.WORKER_DEAD_SEC)


def worker_beat() -> None:
    """Record that this process is alive now."""
    now = timezone.now()
    worker_id = current_worker_id()
    if not Worker.objects.filter(id=worker_id).update(heartbeat_at=now):
        Worker.objects.bulk_create(
            [Worker(id=worker_id, started_at=now, heartbeat_at=now)], ignore_conflicts=True
        )


def worker_is_dead(worker_id: str) -> bool:
    """True only for a worker whose row exists and has not been renewed in time."""
    return Worker.objects.filter(id=worker_id, heartbeat_at__lt=dead_cutoff()).exists()


def dead_workers():
    return Worker.objects.filter(heartbeat_at__lt=dead_cutoff()).values("id")


def _run_hook(hook) -> None:
    try:
        hook()
    except Exception:  # noqa: BLE001 - a failing hook must never stop the beats
        logger.exception("heartbeat hook %s failed once", hook.__name__)


def heartbeat_running() -> bool:
    """Whether this process beats already (`heartbeat_start` then makes no query)."""
    return os.getpid() in _started


def heartbeat_start() -> None:
    """Beat once now (so the row exists before any socket names it), then every few seconds."""
    pid = os.getpid()
    with _start_lock:
        if pid in _started:
            return
        _started.add(pid)
    interval = settings.WORKER_DEAD_SEC / 4

    def run():
        while True:
            try:
                worker_beat()
            except DatabaseError:
                logger.exception("worker heartbeat failed once")
            try:
                for hook in list(_beat_hooks):
                    _run_hook(hook)
            finally:
                # Hold no connection between beats: nothing is left open when the process
                # (or a test database) goes away.
                connection.close()
            time.sleep(interval)

    try:
        worker_beat()
    finally:
        connection.close()
    threading.Thread(target=run, name="worker-heartbeat", daemon=True).start()
