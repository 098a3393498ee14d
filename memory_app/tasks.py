"""Background work of memory_app, run by the task worker (`manage.py db_worker`), and the
services that queue it.

They live here, beside the task, because the task's body is `memory_consolidate` in
memory_app.services: a service there that queued the task would import this module, which
imports that one (docs/design.md §16).
"""

from __future__ import annotations

from datetime import datetime

from django.db import transaction
from django.utils import timezone
from django_tasks import TaskResultStatus, task, task_backends
from django_tasks_db import DatabaseBackend
from django_tasks_db.models import DBTaskResult

from memory_app.services import (
    memory_consolidate,
    memory_has_pending_episodes,
    memory_idle_sessions,
)
from sessions_app.core.ids import is_test_session


@task()
def consolidate_session(session_id: str) -> dict[str, int]:
    return memory_consolidate(session_id=session_id)


def memory_consolidate_enqueue(*, session_id: str) -> None:
    """Queue consolidation of a session once the caller's transaction commits.

    Nothing is queued for a session without pending episodes (a WebSocket that closes
    without a turn having run), nor for a test session (consolidation skips those).
    """

    def enqueue():
        if memory_has_pending_episodes(session_id=session_id):
            consolidate_session.enqueue(session_id)

    if not is_test_session(session_id):
        transaction.on_commit(enqueue)


def _sessions_already_queued() -> set[str]:
    """Sessions whose consolidation waits in (or runs from) the database queue.

    Only the database backend can be asked; with any other, a session may be queued twice,
    which costs a run that finds nothing pending, never a duplicate fact.
    """
    if not isinstance(task_backends[consolidate_session.backend], DatabaseBackend):
        return set()
    waiting = DBTaskResult.objects.filter(
        task_path=consolidate_session.module_path,
        status__in=[TaskResultStatus.READY, TaskResultStatus.RUNNING],
    ).values_list("args_kwargs", flat=True)
    return {args_kwargs["args"][0] for args_kwargs in waiting if args_kwargs.get("args")}


def memory_consolidate_idle(*, now: datetime | None = None) -> list[str]:
    """Queue consolidation for every session idle for CONSOLIDATE_IDLE_SEC with pending
    episodes (`memory_idle_sessions`); returns the session ids queued.

    Sessions whose consolidation is already waiting in the queue are skipped, so a sweep loop
    faster than the worker does not pile up tasks.
    """
    session_ids = memory_idle_sessions(now=now or timezone.now())
    if session_ids:
        queued = _sessions_already_queued()
        session_ids = [session_id for session_id in session_ids if session_id not in queued]
    for session_id in session_ids:
        transaction.on_commit(lambda session_id=session_id: consolidate_session.enqueue(session_id))
    return session_ids
