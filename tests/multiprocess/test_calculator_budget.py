"""The calculator cannot freeze a worker (docs/design.md §27): a power tower whose value has
ten million digits answers at once with a clear error, and the same worker's `/healthz`
answers within a second throughout (it took 27-29 s while the number was computed)."""

import json

import pytest

from sessions_app.services import sessions
from tests.builders import token_of
from tests.multiprocess.clients import http
from tests.multiprocess.probes import HealthWatch
from tests.multiprocess.servers import daphne

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_power_tower_is_refused_while_the_worker_stays_healthy(alice):
    sessions.session_create(owner_id=alice.id, session_id="maths")
    token = token_of(alice)
    with daphne() as server, HealthWatch(server) as health:
        status, answer = http(
            "POST",
            f"{server}/api/sessions/maths/messages/",
            token,
            {"text": "what is (((10**100)**100)**100)**20?"},
        )
        assert status == 200, answer
    said = json.dumps(answer)
    assert "more than 4,000 digits" in said, said[:2000]
    print(f"slowest /healthz during the turn: {health.slowest:.3f} s")
    assert health.slowest < 1.0
