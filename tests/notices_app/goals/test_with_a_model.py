"""A goal worked on by a real provider SDK against the local fake model server: each
check-in's turn sees the goal and its earlier notes, notes and the result reach the
conversation and the webhook once each, the usage shows up in the conversation's, and failing
check-ins are retried with back-off and then fail the goal."""

import threading

import pytest
from django.db import connections

from notices_app.services.goals import goal_create
from sessions_app.runtime.turn.turns import turn_run
from sessions_app.services.sessions import session_usage
from sessions_app.store import get_store
from tests.fakes.llm_server import Reply, serving_the_apps_model
from tests.handshakes import hold_waits
from tests.helpers import GUARD_SEC

from .conftest import check_ins_due, make_next_check_in_due, run_due_tasks, turn_starts

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def model(settings):
    with serving_the_apps_model(settings) as server:
        yield server


def user_text_of(request: dict) -> str:
    return "\n".join(m["content"] for m in request["messages"] if m["role"] == "user")


def test_notes_and_the_result_are_reported_once_each_and_seen_by_later_check_ins(
    backend, alice, chat, receiver, model
):
    goal = goal_create(owner_id=alice.id, text="find a flat in Lisbon", set_in=chat)
    model.script(
        Reply(calls=[("goal_update", {"note": "three flats look good"})]),
        Reply(text="Noted."),
    )
    run_due_tasks()  # check-in 1, then the note's delivery
    goal.refresh_from_db()
    assert (goal.status, goal.turns_used) == ("active", 1)
    first_tools = {tool["function"]["name"] for tool in model.requests[0]["tools"]}
    assert {"goal_update", "goal_done"} <= first_tools
    assert "find a flat in Lisbon" in user_text_of(model.requests[0])

    model.script(
        Reply(calls=[("goal_done", {"result": "flat B, 2 rooms, 900 EUR"})]),
        Reply(text="Done."),
    )
    make_next_check_in_due(goal)
    run_due_tasks()
    run_due_tasks()  # nothing more: no third check-in, no second POST
    goal.refresh_from_db()
    assert (goal.status, goal.result, goal.turns_used) == ("done", "flat B, 2 rooms, 900 EUR", 2)
    # The second check-in saw the goal and the note of the first.
    second = user_text_of(model.requests[2])
    assert "Check-in 2 of at most 10" in second
    assert "- three flats look good" in second

    notices = get_store().get_proactive(chat)
    assert [n.message_id for n in notices] == [f"goal:{goal.id}:note:1", f"goal:{goal.id}:result"]
    assert "three flats look good" in notices[0].content
    assert "flat B" in notices[1].content
    assert [p["body"]["message_id"] for p in receiver.posts] == [n.message_id for n in notices]
    assert len(turn_starts(goal.session_id)) == 2
    # What the check-ins spent shows in the conversation's usage, under sub_agents (§22).
    usage = session_usage(session_id=chat, owner_id=alice.id)
    assert usage["sub_agents"]["goal"]["input_tokens"] == 4 * 11
    assert usage["sub_agents"]["goal"]["output_tokens"] == 4 * 7


def test_failing_check_ins_are_retried_with_back_off_then_the_goal_fails(
    backend, alice, chat, model, settings
):
    settings.GOAL_MAX_ERRORS = 2
    settings.GOAL_RETRY_BASE_SEC = 120
    goal = goal_create(owner_id=alice.id, text="find a flat in Lisbon", set_in=chat)
    model.script(Reply(status=400, error="model overloaded"))
    run_due_tasks()
    goal.refresh_from_db()
    assert (goal.status, goal.errors, goal.turns_used) == ("active", 1, 0)
    assert "model overloaded" in goal.last_error
    # The retry waits the back-off, not check_every_sec.
    wait = (goal.next_check_at - goal.created_at).total_seconds()
    assert 120 <= wait < 3600
    assert len(check_ins_due(goal.id)) == 1

    model.script(Reply(status=400, error="model overloaded"))
    make_next_check_in_due(goal)
    run_due_tasks()
    goal.refresh_from_db()
    assert (goal.status, goal.errors) == ("failed", 2)
    assert check_ins_due(goal.id) == []
    (notice,) = get_store().get_proactive(chat)
    assert notice.message_id == f"goal:{goal.id}:end"
    assert "failed 2 check-ins in a row" in notice.content
    assert len(model.requests) == 2


def test_a_check_in_at_the_turn_limit_waits_and_runs_later(
    backend, alice, chat, settings, monkeypatch
):
    settings.MAX_TURNS_PER_USER = 1
    held = hold_waits(monkeypatch)

    def turn_in_a_tab():
        try:
            turn_run(session_id=chat, text="wait 1 second", owner_id=alice.id)
        finally:
            connections.close_all()

    tab = threading.Thread(target=turn_in_a_tab)
    tab.start()
    assert held.started.wait(GUARD_SEC), "the person's one turn runs"
    goal = goal_create(owner_id=alice.id, text="work out what 6*7 is and report it", set_in=chat)
    run_due_tasks()
    goal.refresh_from_db()
    assert (goal.status, goal.check_ins, goal.turns_used) == ("active", 0, 0)
    assert turn_starts(goal.session_id) == []
    assert check_ins_due(goal.id)[0].args_kwargs["args"] == [goal.id, 1]  # the same, later
    held.release()
    tab.join(GUARD_SEC)

    make_next_check_in_due(goal)
    run_due_tasks()
    goal.refresh_from_db()
    assert (goal.status, goal.check_ins) == ("done", 1)


def test_a_check_in_bills_nobody_else_when_its_conversation_id_changed_hands(
    backend, alice, bob, chat, model
):
    from sessions_app.services import deletion, sessions

    goal = goal_create(owner_id=alice.id, text="find a flat in Lisbon", set_in=chat)
    deletion.session_delete(session_id=chat, owner_id=alice.id)
    sessions.session_create(owner_id=bob.id, session_id=chat)  # the same id, now Bob's
    model.script(Reply(text="Still looking."))
    run_due_tasks()
    goal.refresh_from_db()
    assert goal.turns_used == 1

    assert session_usage(session_id=chat, owner_id=bob.id)["sub_agents"] == {}
    assert get_store().get_proactive(chat) == []
