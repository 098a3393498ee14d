"""A real Daphne, whose WebSocket messages are capped at 1 MiB (docs/design.md §8): a session
with more history than that, and a prompt of 100,000 emoji, open and run without 1011."""

import asyncio
import json

import pytest
from websockets.exceptions import ConnectionClosed

from sessions_app.store import get_store
from tests.builders import assistant, user
from tests.multiprocess.clients import RECEIVE_TIMEOUT, receive, until_agent_end, ws_connect
from tests.multiprocess.servers import daphne

pytestmark = pytest.mark.django_db(transaction=True)

EMOJI_PROMPT = "😀" * 100_000


def test_more_than_a_megabyte_of_history_and_an_emoji_prompt_open_and_stay_open(alice, alice_token):
    store = get_store()
    store.create("long", owner_id=alice.id)
    store.append(
        "long",
        [user(f"big {n} " + "x" * 96_000) if n % 2 else assistant("y" * 96_000) for n in range(12)]
        + [user(EMOJI_PROMPT), assistant("that is a lot of smiles")],
    )

    async def scenario(base):
        async with ws_connect(base, "long", alice_token) as ws:
            first = await receive(ws)
            assert first["type"] == "session"
            assert first["entries"][-1]["content"] == "that is a lot of smiles"
            assert first["entries"][-2]["content"] == EMOJI_PROMPT
            assert first["has_more"] is True

            # The socket lives on: a turn whose request is 100,000 emoji streams back whole.
            await ws.send(json.dumps({"type": "prompt", "text": EMOJI_PROMPT}, ensure_ascii=False))
            events = await until_agent_end(ws)
            stored = [event["entry"] for event in events if event["type"] == "entry"]
            assert any(entry.get("content") == EMOJI_PROMPT for entry in stored)
            await ws.send(json.dumps({"type": "ping"}))
            assert (await receive(ws))["type"] == "pong"

        # And so does every later connect, to the session grown by that turn.
        async with ws_connect(base, "long", alice_token) as again:
            first = await receive(again)
            assert first["entries"][-1]["seq"] == events[-1]["last_seq"]
            await again.send(json.dumps({"type": "ping"}))
            assert (await asyncio.wait_for(again.recv(), RECEIVE_TIMEOUT)) == '{"type": "pong"}'

    with daphne() as base:
        asyncio.run(scenario(base))


def test_an_inbound_message_over_daphnes_cap_closes_with_1009_and_a_reason(alice, alice_token):
    """`manage.py serve` (what make run and every deployed worker run): a frame over the
    1 MiB cap that Daphne enforces before the application sees it still closes with a code."""
    get_store().create("big-in", owner_id=alice.id)

    async def scenario(base):
        async with ws_connect(base, "big-in", alice_token) as ws:
            assert (await receive(ws))["type"] == "session"
            await ws.send(json.dumps({"type": "prompt", "text": "x" * (1024 * 1024 + 1)}))
            with pytest.raises(ConnectionClosed) as closed:
                while True:
                    await receive(ws)
        return closed.value.rcvd

    with daphne(serve=True) as base:
        close = asyncio.run(scenario(base))
    assert close is not None and close.code == 1009, close
    assert "exceeds payload limit" in close.reason
    assert get_store().get_messages("big-in") == []
