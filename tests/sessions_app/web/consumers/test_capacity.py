"""Many long turns on one worker: a short turn and an abort still go through at once, and the
per-user limits answer as specified."""

import pytest

from sessions_app.core.throttles import TurnRateThrottle
from tests.builders import make_user, token_client, token_of

from .conftest import RECEIVE_TIMEOUT, events_until, open_session, turn_done

pytestmark = [pytest.mark.anyio, pytest.mark.django_db(transaction=True)]

LONG_TURNS = 10


def tool_call_stored(event) -> bool:
    return event["type"] == "entry" and bool(event["entry"].get("tool_calls"))


async def start_long_turn(path, token):
    """A socket whose turn runs a 120-second wait; returns once the wait has started."""
    ws, _ = await open_session(path, token)
    await ws.send_json_to({"type": "prompt", "text": "wait 120 seconds"})
    await events_until(ws, tool_call_stored)
    return ws


async def test_long_turns_do_not_starve_a_short_turn_or_an_abort(backend, settings):
    from asgiref.sync import sync_to_async

    users = [await sync_to_async(make_user)(f"user{n}") for n in range(LONG_TURNS + 1)]
    tokens = [await sync_to_async(token_of)(user) for user in users]
    long_turns = [
        await start_long_turn(f"/ws/sessions/long-{n}/", tokens[n]) for n in range(LONG_TURNS)
    ]

    # Every long turn is still waiting: none of them can end before 120 s or an abort.
    short, _ = await open_session("/ws/sessions/short/", tokens[-1])
    await short.send_json_to({"type": "prompt", "text": "what is 2+3"})
    events = await events_until(short, turn_done)
    assert events[-1]["status"] == "completed"
    assert any(e["type"] == "entry" and e["entry"]["content"] == "5" for e in events)

    first = long_turns[0]
    await first.send_json_to({"type": "abort"})
    events = await events_until(first, turn_done)
    assert events[-1]["status"] == "aborted"

    # The other long turns were running all along; stop them the same way.
    for ws in long_turns[1:]:
        await ws.send_json_to({"type": "abort"})
        assert (await events_until(ws, turn_done))[-1]["status"] == "aborted"
    for ws in [*long_turns, short]:
        await ws.disconnect()


async def test_a_user_beyond_max_turns_is_refused_on_the_socket_and_over_http(
    backend, alice, alice_token, settings
):
    settings.MAX_TURNS_PER_USER = 2
    running = [await start_long_turn(f"/ws/sessions/mine-{n}/", alice_token) for n in range(2)]
    third, _ = await open_session("/ws/sessions/mine-3/", alice_token)
    await third.send_json_to({"type": "prompt", "text": "hello"})
    refused = await third.receive_json_from(timeout=RECEIVE_TIMEOUT)
    assert refused["type"] == "error" and refused["code"] == "too_many_turns", refused

    from asgiref.sync import sync_to_async

    def over_http():
        return token_client(alice).post(
            "/api/sessions/mine-3/messages/", {"text": "hello"}, format="json"
        )

    response = await sync_to_async(over_http)()
    assert response.status_code == 429 and response.json()["code"] == "too_many_turns"

    for ws in running:
        await ws.send_json_to({"type": "abort"})
        assert (await events_until(ws, turn_done))[-1]["status"] == "aborted"
    # With the turns ended, the user may start one again.
    await third.send_json_to({"type": "prompt", "text": "hello"})
    assert (await events_until(third, turn_done))[-1]["status"] == "completed"
    for ws in [*running, third]:
        await ws.disconnect()


async def test_socket_prompts_share_the_turn_throttle_with_http(backend, alice_token, monkeypatch):
    monkeypatch.setattr(TurnRateThrottle, "THROTTLE_RATES", {"turns": "2/min"})
    ws, _ = await open_session("/ws/sessions/chatty/", alice_token)
    for _ in range(2):
        await ws.send_json_to({"type": "prompt", "text": "hello"})
        assert (await events_until(ws, turn_done))[-1]["status"] == "completed"
    await ws.send_json_to({"type": "prompt", "text": "hello"})
    refused = await ws.receive_json_from(timeout=RECEIVE_TIMEOUT)
    assert refused["type"] == "error" and refused["code"] == "throttled", refused
    await ws.disconnect()


async def test_a_prompt_sent_the_moment_a_turn_ends_is_not_refused_for_it(
    backend, alice, alice_token, settings, monkeypatch
):
    """`agent_end` tells the person the turn is over: a prompt they send on reading it is
    never refused with too_many_turns for that turn, however long the turn's last cleanup
    (its lease's release) takes. The release is held here until the new prompt is answered."""
    import threading

    from sessions_app.runtime.turn.lease import TurnLease

    settings.MAX_TURNS_PER_USER = 1
    released = threading.Event()
    original_release = TurnLease.release

    def held_release(self):
        if self.session_id == "first":
            released.wait(RECEIVE_TIMEOUT)
        original_release(self)

    monkeypatch.setattr(TurnLease, "release", held_release)
    first, _ = await open_session("/ws/sessions/first/", alice_token)
    second, _ = await open_session("/ws/sessions/second/", alice_token)
    try:
        await first.send_json_to({"type": "prompt", "text": "hello"})
        assert (await events_until(first, turn_done))[-1]["status"] == "completed"
        await second.send_json_to({"type": "prompt", "text": "what is 2+3"})
        events = await events_until(second, lambda e: turn_done(e) or e["type"] == "error")
        assert events[-1]["type"] == "agent_end", events[-1]
        assert events[-1]["status"] == "completed"
    finally:
        released.set()
        for ws in (first, second):
            await ws.disconnect()
