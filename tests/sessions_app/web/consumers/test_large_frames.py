"""Frames as large as Daphne takes, built to be the worst for the checks, are refused with the
usual errors and leave the socket serving (docs/design.md §27); a large frame is parsed and
checked off the event loop."""

import threading

import pytest
from channels.db import database_sync_to_async

from sessions_app.core import limits
from sessions_app.store import get_store
from sessions_app.web import consumers

from .conftest import RECEIVE_TIMEOUT, events_until, open_session, turn_done

pytestmark = [pytest.mark.anyio, pytest.mark.django_db(transaction=True)]

# Just under WEBSOCKET_MESSAGE_MAX_BYTES, with room for the frame around the payload.
PAYLOAD = 1024 * 1024 - 200
DEEP = "[" * (limits.JSON_MAX_DEPTH + 1)

ADVERSARIAL = [
    # (frame text, the code it is refused with)
    ('{"type": "prompt", "text": "' + "[" * 200 + '\\"' * (PAYLOAD // 2 - 100), "bad_request"),
    (DEEP + '"' + '\\"' * (PAYLOAD // 2), "bad_request"),
    ("[" * PAYLOAD, "bad_request"),
    ("[]" * (PAYLOAD // 2), "bad_request"),
    ('{"type": "prompt", "text": "' + " " * PAYLOAD + '"}', "invalid"),
    ('{"type": "ping", "x": "' + '\\\\"' * (PAYLOAD // 3) + '"}', "bad_request"),
    ('{"type": "prompt", "text": "' + "\\u0000" * (PAYLOAD // 6) + '"}', "invalid"),
]


async def test_the_worst_frames_at_a_megabyte_are_refused_and_the_socket_keeps_serving(
    backend, alice_token
):
    ws, _ = await open_session("/ws/sessions/s1/", alice_token)
    for text, code in ADVERSARIAL:
        await ws.send_to(text_data=text)
        event = await ws.receive_json_from(timeout=RECEIVE_TIMEOUT)
        assert event["type"] == "error" and event["code"] == code, (text[:40], event)
    assert (await database_sync_to_async(get_store().get_meta)("s1")).last_seq == 0
    await ws.send_json_to({"type": "prompt", "text": "what is 6*7?"})
    assert (await events_until(ws, turn_done))[-1]["status"] == "completed"
    await ws.disconnect()


async def test_a_large_frame_is_checked_off_the_event_loop_and_a_small_one_on_it(
    backend, alice_token, monkeypatch
):
    checked_in = []
    check = consumers.frame_checked

    def recording(text_data):
        checked_in.append(threading.current_thread() is threading.main_thread())
        return check(text_data)

    monkeypatch.setattr(consumers, "frame_checked", recording)
    ws, _ = await open_session("/ws/sessions/s1/", alice_token)
    for text in ('{"type": "ping"}', '{"type": "ping", "pad": "' + "a" * PAYLOAD + '"}'):
        await ws.send_to(text_data=text)
        assert await ws.receive_json_from(timeout=RECEIVE_TIMEOUT) == {"type": "pong"}
    await ws.disconnect()
    assert checked_in == [True, False]  # the event loop runs in the main thread here
