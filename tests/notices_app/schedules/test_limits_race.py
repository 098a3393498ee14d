"""Creates racing for the last free place under MAX_SCHEDULES_PER_USER, on PostgreSQL: real
threads released together by a barrier; exactly one of them gets it."""

import pytest

from notices_app.models import Schedule
from notices_app.services.schedules import TooManySchedules, schedule_create
from tests.conftest import requires_postgres
from tests.helpers import run_in_threads

pytestmark = [requires_postgres, pytest.mark.django_db(transaction=True)]

RACERS = 6


def test_racing_creates_never_pass_the_limit(alice, settings):
    settings.MAX_SCHEDULES_PER_USER = 3
    for n in range(2):
        schedule_create(owner_id=alice.id, text=f"r{n}", in_seconds=600)

    def create(index):
        try:
            schedule_create(owner_id=alice.id, text=f"racer {index}", in_seconds=600)
        except TooManySchedules:
            return "refused"
        return "created"

    results = run_in_threads(create, RACERS)

    assert sorted(results) == ["created"] + ["refused"] * (RACERS - 1)
    assert Schedule.objects.filter(owner=alice, state="active").count() == 3
