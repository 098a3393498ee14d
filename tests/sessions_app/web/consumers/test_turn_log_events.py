"""What a tab sees of the turn log (docs/design.md §20): every `entry` event carries its schema
version and its timings, and a thinking change reaches every tab as it happens."""

import pytest
from channels.db import database_sync_to_async

from sessions_app.services import sessions

from .conftest import events_until, open_session, turn_done

pytestmark = [pytest.mark.anyio, pytest.mark.django_db(transaction=True)]


async def test_entry_events_carry_the_version_and_the_timings(backend, alice_token):
    tab, first = await open_session("/ws/sessions/s1/", alice_token)
    assert first["session"]["thinking"] == "off"
    await tab.send_json_to({"type": "prompt", "text": "what is 6*7?"})
    entries = [e["entry"] for e in await events_until(tab, turn_done) if e["type"] == "entry"]
    assert {entry["v"] for entry in entries} == {1}
    result = next(entry for entry in entries if entry["role"] == "tool")
    assert result["data"]["tool"]["outcome"] == "ok"
    assert isinstance(result["data"]["tool"]["duration_ms"], int)
    await tab.disconnect()


async def test_a_thinking_change_reaches_every_tab(backend, alice, alice_token):
    tab, _ = await open_session("/ws/sessions/s1/", alice_token)
    await database_sync_to_async(sessions.session_configure)(
        session_id="s1", owner_id=alice.id, thinking="medium"
    )
    (event,) = await events_until(tab, lambda e: e["type"] == "entry")
    assert event["entry"]["kind"] == "thinking_change"
    assert event["entry"]["data"] == {"from": "off", "to": "medium"}
    await tab.disconnect()
