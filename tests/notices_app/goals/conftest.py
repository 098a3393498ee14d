"""Goal fixtures: the schedules' real task worker and webhook receiver, and a conversation."""

import pytest
from django.utils import timezone
from django_tasks_db.models import DBTaskResult

from notices_app.models import Goal
from sessions_app.services import sessions
from tests.helpers import eventually
from tests.notices_app.schedules.conftest import (  # noqa: F401 - fixtures and helpers
    Receiver,
    let_send_to,
    ready_tasks,
    receiver,
    run_due_tasks,
)


def make_next_check_in_due(goal: Goal) -> None:
    """The goal's next check-in, queued check_every_sec ahead, is due now."""
    goal.refresh_from_db()
    DBTaskResult.objects.filter(id=goal.task_id).update(run_after=timezone.now())


def check_ins_due(goal_id: int) -> list:
    return [row for row in ready_tasks("check_in_goal") if row.args_kwargs["args"][0] == goal_id]


def turn_starts(session_id: str) -> list:
    from sessions_app.store import get_store

    return [e for e in get_store().get_messages(session_id) if e.kind == "turn_start"]


@pytest.fixture
def chat(alice):
    sessions.session_create(owner_id=alice.id, session_id="chat-1")
    return "chat-1"


__all__ = [
    "Receiver",
    "check_ins_due",
    "eventually",
    "let_send_to",
    "make_next_check_in_due",
    "run_due_tasks",
    "turn_starts",
]
