"""Background work of notices_app, run by the task worker (`manage.py db_worker`).

Every task here is safe to run twice: a schedule's run is fired once per (schedule, run
time) by a unique row, and a delivery attempt first claims its outbox row. So a duplicate
task — a recovery that queued one more, two workers — costs a no-op, never a second notice.
"""

from datetime import datetime, timedelta

from django.utils import timezone
from django_tasks import TaskResultStatus, task, task_backends

# A task RUNNING for longer than this belongs to a worker that died (a scheduled prompt is
# one turn: MAX_STEPS model calls, well under this).
RUNNING_STALE_SEC = 15 * 60


@task()
def fire_schedule(schedule_id: int, run_at: str) -> str:
    # Imported here, like every task body: the services import this module to enqueue.
    from notices_app.schedules import schedule_fire

    return schedule_fire(schedule_id=schedule_id, run_at=datetime.fromisoformat(run_at))


@task()
def send_notice(outbox_id: int) -> str:
    from notices_app.delivery import notice_send

    return notice_send(outbox_id=outbox_id)


def _database_backend():
    from django_tasks_db import DatabaseBackend

    backend = task_backends[fire_schedule.backend]
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
    from django_tasks_db.models import DBTaskResult

    deleted, _ = DBTaskResult.objects.filter(id=task_id, status=TaskResultStatus.READY).delete()
    return bool(deleted)


def task_is_waiting(task_id: str, *, running_stale_sec: float = RUNNING_STALE_SEC) -> bool:
    """Whether a queued task will still run: READY, or RUNNING for less than
    `running_stale_sec` (longer, its worker is taken to be dead)."""
    if not task_id or _database_backend() is None:
        return False
    from django_tasks_db.models import DBTaskResult

    row = DBTaskResult.objects.filter(id=task_id).values("status", "started_at").first()
    if row is None:
        return False
    if row["status"] == TaskResultStatus.READY:
        return True
    stale = timezone.now() - timedelta(seconds=running_stale_sec)
    return row["status"] == TaskResultStatus.RUNNING and row["started_at"] > stale
