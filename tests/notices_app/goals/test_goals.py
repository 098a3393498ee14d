"""Goals (docs/design.md §25): `/goal` in a conversation, worked on by the task worker in a
sub-agent session of its own, reported as notices into that conversation and out through the
person's channels, once each; from a test session, elsewhere and never outside."""

import pytest

from notices_app.models import Goal, NoticeOutbox
from sessions_app.services import sessions
from sessions_app.store import get_store
from sessions_app.web.commands import CommandError, command_run
from tests.helpers import run_chat

from .conftest import check_ins_due, make_next_check_in_due, run_due_tasks, turn_starts

pytestmark = pytest.mark.django_db(transaction=True)

SIX_TIMES_SEVEN = "/goal work out what 6*7 is and report it"


def test_a_goal_it_can_do_is_done_on_its_first_check_in_and_reported_once(
    backend, alice, chat, receiver
):
    said = command_run(session_id=chat, owner_id=alice.id, line=SIX_TIMES_SEVEN)
    goal = Goal.objects.get()
    assert said.command == "goal"
    assert said.data["goal"]["status"] == "active"
    assert "reported here" in said.text

    run_due_tasks()  # the first check-in runs at once, then the notice's deliveries
    run_due_tasks()  # nothing more is due: no second check-in, no second POST

    goal.refresh_from_db()
    assert goal.status == "done"
    assert "42" in goal.result
    (notice,) = get_store().get_proactive(chat)
    assert notice.message_id == f"goal:{goal.id}:result"
    assert "42" in notice.content
    assert [post["body"]["message_id"] for post in receiver.posts] == [notice.message_id]
    assert receiver.posts[0]["body"]["session_id"] == chat
    # One check-in, one turn, in the goal's own session: hidden, owned by the person.
    assert len(turn_starts(goal.session_id)) == 1
    meta = get_store().get_meta(goal.session_id)
    assert (meta.owner_id, meta.agent, meta.spawned_by) == (alice.id, "goal", chat)
    listed = {m.id for m in get_store().list(owner_id=alice.id, include_subagents=False)}
    assert goal.session_id not in listed


def test_a_goal_set_in_a_test_session_reports_elsewhere_and_sends_nothing_out(
    backend, alice, chat, receiver
):
    sessions.session_create(owner_id=alice.id, session_id="test-goal")
    said = command_run(session_id="test-goal", owner_id=alice.id, line=SIX_TIMES_SEVEN)
    assert "notices conversation" in said.text
    run_due_tasks()
    run_due_tasks()

    goal = Goal.objects.get()
    assert goal.status == "done"
    assert get_store().get_proactive("test-goal") == []
    # The person's notices conversation: their latest real one.
    (notice,) = get_store().get_proactive(chat)
    assert "42" in notice.content
    assert receiver.posts == []
    assert not NoticeOutbox.objects.exists()


def test_a_goal_it_cannot_do_checks_in_up_to_max_turns_then_is_exhausted(backend, alice, chat, api):
    created = api.post(
        "/api/goals/",
        {"text": "find a flat in Lisbon", "report_to": chat, "max_turns": 2},
        format="json",
    )
    assert created.status_code == 201, created.json()
    goal_id = created.json()["id"]
    run_due_tasks()
    goal = Goal.objects.get(id=goal_id)
    assert (goal.status, goal.turns_used) == ("active", 1)
    make_next_check_in_due(goal)  # it waits check_every_sec
    run_due_tasks()
    goal.refresh_from_db()
    assert (goal.status, goal.turns_used) == ("exhausted", 2)
    assert len(turn_starts(goal.session_id)) == 2
    (notice,) = get_store().get_proactive(chat)
    assert notice.message_id == f"goal:{goal.id}:end"
    assert "2 check-ins" in notice.content


def test_a_deleted_account_takes_its_goals_their_sessions_and_check_ins(backend, alice, chat):
    from accounts_app.deletion import account_delete

    command_run(session_id=chat, owner_id=alice.id, line="/goal find a flat in Lisbon")
    goal = Goal.objects.get()
    assert check_ins_due(goal.id)
    assert account_delete(user_id=alice.id)
    assert not Goal.objects.exists()
    assert get_store().get_meta(goal.session_id) is None
    assert check_ins_due(goal.id) == []


def test_the_terminal_sets_lists_and_cancels_goals(alice, chat):
    completed = run_chat(
        "chat-1",
        "--user",
        "alice",
        lines="/goal find a flat in Lisbon\n/goals\n/goals pause 999\n/quit\n",
        JARVIS_MODEL="offline",
    )
    assert completed.returncode == 0, completed.stderr
    goal = Goal.objects.get()
    assert f"Goal set: #{goal.id} active: find a flat in Lisbon" in completed.stdout
    assert f"#{goal.id} active: find a flat in Lisbon" in completed.stdout
    assert "[not_found] you have no goal #999" in completed.stderr

    cancelled = command_run(session_id=chat, owner_id=alice.id, line=f"/goals cancel {goal.id}")
    assert cancelled.text == f"#{goal.id} cancelled: find a flat in Lisbon"
    assert "/goal <text>" in command_run(session_id=chat, owner_id=alice.id, line="/help").text
    with pytest.raises(CommandError) as refused:
        command_run(session_id=chat, owner_id=alice.id, line="/goal")
    assert refused.value.code == "bad_request"


def test_the_admin_shows_goals_read_only_and_cancels_through_the_service(admin_client, alice, chat):
    command_run(session_id=chat, owner_id=alice.id, line="/goal find a flat in Lisbon")
    goal = Goal.objects.get()
    page = admin_client.get("/admin/notices_app/goal/")
    assert page.status_code == 200
    assert b"find a flat in Lisbon" in page.content
    assert admin_client.get("/admin/notices_app/goal/add/").status_code == 403
    admin_client.post(
        "/admin/notices_app/goal/",
        {"action": "cancel_goals", "_selected_action": [goal.id]},
    )
    goal.refresh_from_db()
    assert goal.status == "cancelled"
    assert check_ins_due(goal.id) == []


def test_recovery_leaves_a_live_check_in_alone_and_moves_past_a_dead_one(
    backend, alice, chat, capsys
):
    from django.core.management import call_command
    from django.utils import timezone
    from django_tasks_db.models import DBTaskResult

    command_run(session_id=chat, owner_id=alice.id, line=SIX_TIMES_SEVEN)
    goal = Goal.objects.get()
    # A worker claimed check-in 1 and was killed before its turn began: its task stays
    # RUNNING, the claim with it.
    DBTaskResult.objects.filter(id=goal.task_id).update(status="RUNNING", started_at=timezone.now())
    Goal.objects.filter(id=goal.id).update(check_ins=1, checking_since=timezone.now())

    call_command("recover_deliveries")  # a worker may still be running it: left alone
    assert "0 goal check-in(s)" in capsys.readouterr().out
    call_command("recover_deliveries", "--workers-stopped")  # before workers start again
    assert "1 goal check-in(s)" in capsys.readouterr().out
    run_due_tasks()

    goal.refresh_from_db()
    assert (goal.status, goal.check_ins, goal.turns_used) == ("done", 2, 2)
    assert "Check-in 2 of" in get_store().get_messages(goal.session_id)[1].content
    assert len(turn_starts(goal.session_id)) == 1  # check-in 1 never reached its turn
