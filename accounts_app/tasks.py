"""The periodic retention sweep, run by the task worker (`manage.py db_worker`).

A task that queues its own next run (`run_after`), rather than a loop process like
`consolidate_memory --idle --loop`: the sweep needs no process of its own beside the
workers, the queue is in the database so the chain survives restarts and deploys, and when
several `db_worker` run, one claims each run (the backend's claim is a row lock). The next
run is queued before the sweep, so a sweep that fails does not end the chain; a run that
finds another run already waiting queues none, so two chains started by accident become
one.
"""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.utils import timezone
from django_tasks import TaskResultStatus, task, task_backends
from django_tasks_db import DatabaseBackend
from django_tasks_db.models import DBTaskResult

from accounts_app.retention import retention_sweep


def _waiting_runs() -> int:
    if not isinstance(task_backends[retention_sweep_periodic.backend], DatabaseBackend):
        return 0
    return DBTaskResult.objects.filter(
        task_path=retention_sweep_periodic.module_path, status=TaskResultStatus.READY
    ).count()


def retention_sweep_schedule() -> bool:
    """Queue the next periodic sweep RETENTION_SWEEP_EVERY_SEC from now, unless one is
    already waiting; whether one was queued."""
    if _waiting_runs():
        return False
    run_after = timezone.now() + timedelta(seconds=settings.RETENTION_SWEEP_EVERY_SEC)
    retention_sweep_periodic.using(run_after=run_after).enqueue()
    return True


@task()
def retention_sweep_periodic() -> int:
    retention_sweep_schedule()
    return len(retention_sweep().deleted)
