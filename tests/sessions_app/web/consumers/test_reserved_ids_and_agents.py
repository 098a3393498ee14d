"""The WebSocket creates what the API creates and nothing else (docs/design.md §6, §8): a
sub-agent's id that is not the user's session, or `?agent=` naming no defined agent, gets
an `error` saying which, then close 4400; nothing is created. A user's own sub-agent
session opens as before."""

import pytest
from channels.db import database_sync_to_async

from sessions_app.store import get_store

from .conftest import RECEIVE_TIMEOUT, communicator, open_session

pytestmark = [pytest.mark.anyio, pytest.mark.django_db(transaction=True)]

sync = database_sync_to_async


async def refused(path, token) -> tuple[str, int]:
    """The `error` code and the close code of a refused handshake."""
    ws = communicator(path, token)
    assert (await ws.connect(timeout=RECEIVE_TIMEOUT))[0]
    event = await ws.receive_json_from(timeout=RECEIVE_TIMEOUT)
    closing = await ws.receive_output(timeout=RECEIVE_TIMEOUT)
    assert event["type"] == "error" and closing["type"] == "websocket.close", (event, closing)
    return event["code"], closing["code"]


@pytest.mark.parametrize("session_id", ["agent_researcher__s1", "agent_librarian:1", "agent_x"])
async def test_a_sub_agent_id_is_not_created_by_a_connect(backend, alice_token, session_id):
    assert await refused(f"/ws/sessions/{session_id}/", alice_token) == ("reserved_id", 4400)
    assert await sync(get_store().get_meta)(session_id) is None


async def test_another_users_sub_agent_session_is_refused_like_a_missing_one(
    backend, alice_token, bob
):
    taken = "agent_researcher__bobs-chat"
    await sync(get_store().create)(taken, agent="researcher", owner_id=bob.id)
    assert await refused(f"/ws/sessions/{taken}/", alice_token) == ("reserved_id", 4400)


async def test_my_sub_agent_session_opens(backend, alice, alice_token):
    mine = "agent_researcher__my-chat"
    await sync(get_store().create)(mine, agent="researcher", owner_id=alice.id)
    ws, first = await open_session(f"/ws/sessions/{mine}/", alice_token)
    assert first["session"]["id"] == mine
    await ws.disconnect()


async def test_an_unknown_agent_is_refused_and_creates_nothing(backend, alice_token):
    assert await refused("/ws/sessions/s1/?agent=nope", alice_token) == ("unknown_agent", 4400)
    assert await sync(get_store().get_meta)("s1") is None
    ws, first = await open_session("/ws/sessions/s1/?agent=researcher", alice_token)
    assert first["session"]["agent"] == "researcher"
    await ws.disconnect()
