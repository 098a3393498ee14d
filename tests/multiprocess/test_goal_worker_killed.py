"""Production shape: a goal's check-in runs in a separate `db_worker` process. SIGKILL that
worker in the middle of a check-in; after the start-up recovery another worker finishes the
goal, and no check-in ran twice (each one's turn is in the goal's session once)."""

import signal
import threading

import pytest
from django.core.management import call_command
from django.db import connections, transaction

from notices_app.models import Goal
from notices_app.services.goals import goal_create
from sessions_app.models import Session
from sessions_app.services import sessions
from sessions_app.store import get_store
from tests.conftest import requires_postgres
from tests.helpers import GUARD_SEC, eventually
from tests.multiprocess.test_schedule_delivery import db_worker
from tests.notices_app.schedules.conftest import Receiver

pytestmark = [requires_postgres, pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


class HeldConversation:
    """Holds the conversation's row lock in a thread of its own, as a long write would: a
    notice into it waits until `release()`. The check-in's `goal_done` adds one, so its turn
    is held there, between the call stored and the result written."""

    def __init__(self, session_id: str):
        self.session_id = session_id
        self.locked = threading.Event()
        self._released = threading.Event()
        self.thread = threading.Thread(target=self._hold)
        self.thread.start()
        assert self.locked.wait(GUARD_SEC)

    def _hold(self):
        try:
            with transaction.atomic():
                Session.objects.select_for_update().filter(id=self.session_id).exists()
                self.locked.set()
                self._released.wait(GUARD_SEC)
        finally:
            connections.close_all()

    def release(self):
        self._released.set()
        self.thread.join(GUARD_SEC)


def goal_done_called(session_id: str) -> bool:
    return any(
        call["name"] == "goal_done"
        for entry in get_store().get_messages(session_id)
        for call in entry.tool_calls or []
    )


def test_a_check_in_killed_with_its_worker_is_not_run_again_and_the_goal_finishes(alice):
    sessions.session_create(owner_id=alice.id, session_id="chat-1")
    receiver = Receiver()
    env = {
        "NOTIFY_WEBHOOK_URL": receiver.url,
        "OUTBOUND_ALLOW_HTTP": "true",
        "OUTBOUND_URL_ALLOWLIST": receiver.host,
    }
    try:
        held = HeldConversation("chat-1")
        goal = goal_create(
            owner_id=alice.id, text="work out what 6*7 is and report it", set_in="chat-1"
        )
        with db_worker(**env) as first:
            eventually(
                lambda: goal_done_called(goal.session_id), what="the check-in calls goal_done"
            )
            first.send_signal(signal.SIGKILL)
            first.wait(GUARD_SEC)
        held.release()
        assert get_store().get_proactive("chat-1") == []  # the killed check-in reported nothing

        call_command("recover_deliveries", "--workers-stopped")  # as `make run` starts
        with db_worker(**env):
            eventually(
                lambda: Goal.objects.get(id=goal.id).status == "done", what="the goal is done"
            )
            eventually(lambda: receiver.posts, what="the webhook got the result")
    finally:
        receiver.close()

    goal.refresh_from_db()
    assert "42" in goal.result
    assert (goal.check_ins, goal.turns_used) == (2, 2)
    history = get_store().get_messages(goal.session_id)
    prompts = [e.content for e in history if e.kind == "message" and e.role == "user"]
    assert [prompt.count("Check-in 1 of") for prompt in prompts] == [1, 0]
    assert [prompt.count("Check-in 2 of") for prompt in prompts] == [0, 1]
    assert [e.data["status"] for e in history if e.kind == "turn_end"] == [
        "interrupted",
        "completed",
    ]
    (notice,) = get_store().get_proactive("chat-1")
    assert notice.message_id == f"goal:{goal.id}:result"
    assert [post["body"]["message_id"] for post in receiver.posts] == [notice.message_id]
