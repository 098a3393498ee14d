"""Background work of memory_app, run by the task worker (`manage.py db_worker`)."""

from django_tasks import task

from memory_app.services import memory_consolidate


@task()
def consolidate_session(session_id: str) -> dict[str, int]:
    return memory_consolidate(session_id=session_id)
