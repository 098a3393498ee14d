"""A Stop for a turn on another worker leaves over the live bus before the rest of the
Stop's work (docs/design.md §26): its PUBLISH is written in the step that checked the
session, while the lease mark waits for a thread of the control pool."""

import pytest
from asgiref.sync import sync_to_async

from sessions_app.runtime.live import live
from sessions_app.runtime.turn import turns as runtime_turns
from sessions_app.services import turns
from sessions_app.store import get_store

pytestmark = [pytest.mark.anyio, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def anyio_backend():
    return "asyncio"


async def test_the_stop_to_another_worker_leaves_before_the_lease_mark(backend, alice, monkeypatch):
    await sync_to_async(get_store().create)("stop-order", owner_id=alice.id)
    order = []

    async def over_the_bus(*, session_id):
        order.append("bus")
        return True

    async def lease_mark(*, session_id):
        order.append("lease")
        return False

    monkeypatch.setattr(live, "abort_elsewhere", over_the_bus)
    monkeypatch.setattr(runtime_turns, "turn_abort_async", lease_mark)
    assert await turns.turn_abort_async(session_id="stop-order", owner_id=alice.id)
    assert order == ["bus", "lease"]
