"""Text in WebSocket frames is checked as the API checks it (docs/design.md §11): a lone
surrogate — JSON's `\\ud800` escape — or a NUL in any string of a frame is an `error`
`invalid`, with the API's words for a prompt; the socket stays open and nothing is stored."""

import pytest
from channels.db import database_sync_to_async

from sessions_app.store import get_store

from .conftest import RECEIVE_TIMEOUT, events_until, open_session, turn_done

pytestmark = [pytest.mark.anyio, pytest.mark.django_db(transaction=True)]

sync = database_sync_to_async

# Frames as a client writes them: JSON text whose escapes decode to lone surrogates.
FRAMES = [
    '{"type": "prompt", "text": "hello \\ud800"}',
    '{"type": "prompt", "text": "/title \\udfff"}',
    '{"type": "approval", "call_id": "\\ud800", "allow": true}',
    '{"type": "ping", "note": ["fine", {"deep": "\\udc80"}]}',
    '{"type": "abort", "\\ud83d": 1}',
    '{"type": "prompt", "text": "fine", "extra": "a\\u0000b"}',
]


async def error_of(ws, raw: str) -> dict:
    await ws.send_to(text_data=raw)
    event = await ws.receive_json_from(timeout=RECEIVE_TIMEOUT)
    assert event["type"] == "error", event
    return event


@pytest.mark.parametrize("raw", FRAMES)
async def test_a_frame_with_text_no_store_can_keep_is_invalid_and_the_socket_stays_open(
    backend, alice_token, raw
):
    ws, _ = await open_session("/ws/sessions/s1/", alice_token)
    assert (await error_of(ws, raw))["code"] == "invalid"
    meta = await sync(get_store().get_meta)("s1")
    assert (meta.last_seq, meta.title) == (0, "")
    await ws.send_json_to({"type": "prompt", "text": "what is 6*7?"})
    assert (await events_until(ws, turn_done))[-1]["status"] == "completed"
    await ws.disconnect()


async def test_a_prompt_is_refused_with_the_apis_words(backend, api, alice_token):
    ws, _ = await open_session("/ws/sessions/s1/", alice_token)
    raw = '{"type": "prompt", "text": "caf\\udce9"}'
    event = await error_of(ws, raw)
    await ws.disconnect()

    def over_http():
        return api.generic(
            "POST", "/api/sessions/s1/messages/", raw, content_type="application/json"
        )

    response = await sync(over_http)()
    assert response.status_code == 400
    assert response.json()["code"] == event["code"] == "invalid"
    assert response.json()["fields"] == {"text": [event["message"]]}
    assert "surrogate" in event["message"]
    assert (await sync(get_store().get_meta)("s1")).last_seq == 0
