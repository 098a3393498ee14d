"""docs/design.md §8: every frame fits in one WebSocket message, however long the conversation.

Daphne refuses messages over 1 MiB; the test communicator does not, so these tests measure
what the server sends.
"""

import json

import pytest
from channels.db import database_sync_to_async
from django.conf import settings

from sessions_app.store import get_store
from tests.builders import assistant, user

from .conftest import RECEIVE_TIMEOUT, communicator, events_until, open_session, turn_done

pytestmark = [pytest.mark.anyio, pytest.mark.django_db(transaction=True)]

sync = database_sync_to_async

BIG = 96_000  # characters: inside the prompt limit, a dozen of them are over a megabyte
EMOJI_PROMPT = "😀" * 100_000


def _long_conversation(session_id, owner_id, *, big=12, short=50):
    """A first message, `big` large exchanges, a 100,000-emoji prompt, then short ones."""
    store = get_store()
    store.create(session_id, owner_id=owner_id)
    store.append(session_id, [user("the very first message")])
    store.append(
        session_id,
        [user(f"big {n} " + "x" * BIG) if n % 2 else assistant("y" * BIG) for n in range(big)],
    )
    store.append(session_id, [user(EMOJI_PROMPT), assistant("that is a lot of smiles")])
    store.append(session_id, [user(f"short {n}") for n in range(short)])
    return store.get_meta(session_id).last_seq


async def _raw_session_frame(path, token):
    ws = communicator(path, token)
    assert (await ws.connect(timeout=RECEIVE_TIMEOUT))[0]
    message = await ws.receive_output(timeout=RECEIVE_TIMEOUT)
    assert message["type"] == "websocket.send", message
    return ws, message["text"]


async def test_a_long_history_opens_with_the_latest_entries_that_fit(backend, alice, alice_token):
    last_seq = await sync(_long_conversation)("long", alice.id)
    await sync(get_store().append_proactive)("long", "n1", "your reminder")

    ws, text = await _raw_session_frame("/ws/sessions/long/", alice_token)
    frame = json.loads(text)

    assert len(text.encode()) <= settings.SNAPSHOT_BUDGET_BYTES
    seqs = [entry["seq"] for entry in frame["entries"]]
    assert seqs == list(range(frame["first_seq"], last_seq + 1))
    assert frame["entries"][-1]["content"] == "short 49"
    assert frame["has_more"] is True and frame["first_seq"] > 1
    # Notices and pending approvals are part of the snapshot whatever its length.
    assert [notice["content"] for notice in frame["notices"]] == ["your reminder"]
    assert frame["approvals"] == []
    await ws.disconnect()


async def test_the_emoji_prompt_travels_as_utf8_not_escaped(backend, alice, alice_token):
    store = get_store()
    await sync(store.create)("smiles", owner_id=alice.id)
    await sync(store.append)("smiles", [user(EMOJI_PROMPT)])

    ws, text = await _raw_session_frame("/ws/sessions/smiles/", alice_token)

    assert "😀" * 100 in text and "\\ud83d" not in text
    assert len(text.encode()) < 450_000  # 4 bytes an emoji, not 12
    assert json.loads(text)["entries"][0]["content"] == EMOJI_PROMPT
    await ws.disconnect()


async def test_resuming_after_a_seq_sends_only_the_gap_when_it_fits(backend, alice, alice_token):
    last_seq = await sync(_long_conversation)("long", alice.id)

    ws, first = await open_session(f"/ws/sessions/long/?after_seq={last_seq - 3}", alice_token)

    assert [entry["seq"] for entry in first["entries"]] == [last_seq - 2, last_seq - 1, last_seq]
    assert first["first_seq"] == last_seq - 2
    await ws.disconnect()


async def test_a_gap_too_large_to_send_gets_the_latest_window(backend, alice, alice_token):
    last_seq = await sync(_long_conversation)("long", alice.id)

    ws, text = await _raw_session_frame("/ws/sessions/long/?after_seq=1", alice_token)
    frame = json.loads(text)

    # first_seq above after_seq + 1: the client cannot join this to what it has, so it
    # starts over from the latest window.
    assert len(text.encode()) <= settings.SNAPSHOT_BUDGET_BYTES
    assert frame["first_seq"] > 2 and frame["has_more"] is True
    assert frame["entries"][-1]["seq"] == last_seq
    await ws.disconnect()


async def test_an_entry_larger_than_the_budget_is_a_stub_in_the_snapshot(
    backend, alice, alice_token, settings
):
    settings.SNAPSHOT_BUDGET_BYTES = 16 * 1024
    store = get_store()
    await sync(store.create)("s1", owner_id=alice.id)
    await sync(store.append)("s1", [user("hello"), assistant("z" * 40_000), user("and then?")])

    ws, first = await open_session("/ws/sessions/s1/", alice_token)

    stub = first["entries"][1]
    assert stub["seq"] == 2 and stub["role"] == "assistant" and stub["truncated"] is True
    assert stub["size"] > 40_000 and stub["preview"] == "z" * 500
    assert "content" not in stub
    assert [entry["seq"] for entry in first["entries"]] == [1, 2, 3]
    await ws.disconnect()


async def test_a_live_entry_larger_than_the_budget_arrives_as_a_stub(
    backend, alice, alice_token, settings
):
    settings.SNAPSHOT_BUDGET_BYTES = 16 * 1024
    ws, _ = await open_session("/ws/sessions/s1/", alice_token)
    prompt = "long request " + "w" * 30_000

    await ws.send_json_to({"type": "prompt", "text": prompt})
    events = await events_until(ws, turn_done)

    entries = [event["entry"] for event in events if event["type"] == "entry"]
    request = next(entry for entry in entries if entry["role"] == "user")
    assert request["truncated"] is True and request["preview"] == prompt[:500]
    page = await sync(get_store().get_messages)("s1", request["seq"] - 1, 1)
    assert page[0].content == prompt
    await ws.disconnect()


async def test_an_inbound_frame_over_the_limit_is_closed_with_1009(backend, alice_token):
    ws, _ = await open_session("/ws/sessions/s1/", alice_token)
    too_big = json.dumps({"type": "prompt", "text": "a" * settings.WEBSOCKET_MESSAGE_MAX_BYTES})

    await ws.send_to(text_data=too_big)

    error = await ws.receive_json_from(timeout=RECEIVE_TIMEOUT)
    assert error["type"] == "error" and error["code"] == "too_large"
    closed = await ws.receive_output(timeout=RECEIVE_TIMEOUT)
    assert closed["type"] == "websocket.close" and closed["code"] == 1009
    assert not await sync(get_store().get_messages)("s1")
