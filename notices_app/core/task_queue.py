"""The task queue as the services of notices_app see it: enqueue a task by its name, and
ask what became of one.

The task bodies (`tasks.py`) call the services (`delivery`, `schedules`), and the services
queue the tasks: `tasks.py` registers each task here when it is imported (from
`NoticesAppConfig.ready`), so the services queue a task without importing the module that
calls them (docs/design.md §16, floors: a registry instead of an upward import).
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.utils import timezone
from django_tasks import DEFAULT_TASK_BACKEND_ALIAS, TaskResultStatus, task_backends
from django_tasks.base import Task
from django_tasks_db import DatabaseBackend
from django_tasks_db.models import DBTaskResult

# A task RUNNING for longer than this belongs to a worker that died (a scheduled prompt is
# one turn: MAX_STEPS model calls, well under this).
RUNNING_STALE_SEC = 15 * 60

# The names the services queue by; tasks.py registers a task under each.
FIRE_SCHEDULE = "fire_schedule"
SEND_NOTICE = "send_notice"
FAN_OUT_NOTICE = "fan_out_notice"
CHECK_IN_GOAL = "check_in_goal"

_TASKS: dict[str, Task] = {}


def task_register(name: str, task: Task) -> None:
    _TASKS[name] = task


def task_enqueue(name: str, *args, run_after: datetime | None = None) -> str:
    """Queue the registered task `name` with `args`; returns the task's id."""
    task = _TASKS[name]
    if run_after is not None:
        task = task.using(run_after=run_after)
    return str(task.enqueue(*args).id)


def _database_backend() -> DatabaseBackend | None:
    backend = task_backends[DEFAULT_TASK_BACKEND_ALIAS]
    return backend if isinstance(backend, DatabaseBackend) else None


def task_cancel_pending(task_id: str) -> bool:
    """Remove a queued task that has not started; False when it runs, ran, or is unknown.

    The database backend has no cancel of its own. Deleting the READY row is safe against a
    worker claiming it at the same moment: the worker holds the row lock while it claims
    (`select_for_update(skip_locked=True)`), the delete waits for that and then no longer
    matches a RUNNING row.
    """
    if not task_id or _database_backend() is None:
        return False
    deleted, _ = DBTaskResult.objects.filter(id=task_id, status=TaskResultStatus.READY).delete()
    return bool(deleted)


def task_is_waiting(task_id: str, *, running_stale_sec: float = RUNNING_STALE_SEC) -> bool:
    """Whether a queued task will still run: READY, or RUNNING for less than
    `running_stale_sec` (longer, its worker is taken to be dead)."""
    if not task_id or _database_backend() is None:
        return False
    row = DBTaskResult.objects.filter(id=task_id).values("status", "started_at").first()
    if row is None:
        return False
    if row["status"] == TaskResultStatus.READY:
        return True
    stale = timezone.now() - timedelta(seconds=running_stale_sec)
    return row["status"] == TaskResultStatus.RUNNING and row["started_at"] > stale
