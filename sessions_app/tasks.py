"""The periodic blob sweep, run by the task worker (`manage.py db_worker`), as the retention
sweep is (accounts_app/tasks.py): a task that queues its own next run, before it sweeps, so a
sweep that fails does not end the chain, and a run that finds another already waiting queues
none."""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.utils import timezone
from django_tasks import TaskResultStatus, task, task_backends
from django_tasks_db import DatabaseBackend
from django_tasks_db.models import DBTaskResult

from sessions_app.services.files import blobs_sweep


def _waiting_runs() -> int:
    if not isinstance(task_backends[blobs_sweep_periodic.backend], DatabaseBackend):
        return 0
    return DBTaskResult.objects.filter(
        task_path=blobs_sweep_periodic.module_path, status=TaskResultStatus.READY
    ).count()


def blobs_sweep_schedule() -> bool:
    """Queue the next periodic sweep BLOBS_SWEEP_EVERY_SEC from now, unless one is already
    waiting; whether one was queued."""
    if _waiting_runs():
        return False
    run_after = timezone.now() + timedelta(seconds=settings.BLOBS_SWEEP_EVERY_SEC)
    blobs_sweep_periodic.using(run_after=run_after).enqueue()
    return True


@task()
def blobs_sweep_periodic() -> int:
    blobs_sweep_schedule()
    return blobs_sweep()
