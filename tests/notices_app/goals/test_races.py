"""Goals under real concurrency on PostgreSQL: threads released together by a barrier.
Racing creates never pass MAX_ACTIVE_GOALS_PER_USER; racing runs of one check-in (a duplicate
task, a second worker) run its turn once."""

import pytest

from notices_app.models import Goal
from notices_app.services.goals import TooManyGoals, goal_check_in, goal_create
from sessions_app.services import sessions
from tests.conftest import requires_postgres
from tests.helpers import run_in_threads

from .conftest import turn_starts

pytestmark = [requires_postgres, pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

RACERS = 6


def test_racing_creates_never_pass_the_limit(alice, settings):
    settings.MAX_ACTIVE_GOALS_PER_USER = 3
    for n in range(2):
        goal_create(owner_id=alice.id, text=f"goal {n}")

    def create(index):
        try:
            goal_create(owner_id=alice.id, text=f"racer {index}")
        except TooManyGoals:
            return "refused"
        return "created"

    assert sorted(run_in_threads(create, RACERS)) == ["created"] + ["refused"] * (RACERS - 1)
    assert Goal.objects.filter(owner=alice, status="active").count() == 3


def test_racing_runs_of_one_check_in_run_its_turn_once(alice):
    sessions.session_create(owner_id=alice.id, session_id="chat-1")
    goal = goal_create(
        owner_id=alice.id, text="work out what 6*7 is and report it", set_in="chat-1"
    )

    outcomes = run_in_threads(lambda _: goal_check_in(goal_id=goal.id, number=1), RACERS)

    assert sorted(outcomes) == ["done"] + ["skipped"] * (RACERS - 1)
    assert len(turn_starts(goal.session_id)) == 1
    goal.refresh_from_db()
    assert (goal.status, goal.check_ins, goal.turns_used) == ("done", 1, 1)
