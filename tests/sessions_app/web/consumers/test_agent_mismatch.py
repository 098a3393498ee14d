"""`?agent=` on an existing session of another agent is refused like the API's 409."""

import pytest
from channels.db import database_sync_to_async

from sessions_app.models import LiveConnection
from sessions_app.store import get_store

from .conftest import RECEIVE_TIMEOUT, communicator, open_session

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.anyio]


async def test_another_agent_gets_agent_mismatch_and_a_close(backend, alice, alice_token):
    await database_sync_to_async(get_store().create)("work", owner_id=alice.id)
    ws = communicator("/ws/sessions/work/?agent=coder", alice_token)
    connected, _ = await ws.connect(timeout=RECEIVE_TIMEOUT)
    assert connected
    error = await ws.receive_json_from(timeout=RECEIVE_TIMEOUT)
    assert error["type"] == "error" and error["code"] == "agent_mismatch"
    assert "'jarvis'" in error["message"]
    closed = await ws.receive_output(timeout=RECEIVE_TIMEOUT)
    assert closed == {"type": "websocket.close", "code": 4409}
    assert not await database_sync_to_async(LiveConnection.objects.exists)()

    # The same agent, or none named, opens it as usual.
    for path in ("/ws/sessions/work/?agent=jarvis", "/ws/sessions/work/"):
        ws, first = await open_session(path, alice_token)
        assert first["session"]["agent"] == "jarvis"
        await ws.disconnect()


async def test_a_new_session_takes_the_agent_named(backend, alice_token):
    ws, first = await open_session("/ws/sessions/fresh/?agent=researcher", alice_token)
    assert first["session"]["agent"] == "researcher"
    await ws.disconnect()
