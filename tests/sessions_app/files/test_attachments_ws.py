"""docs/design.md §23 on the WebSocket: a `prompt` frame's `attachments`, through the real
ASGI stack."""

import io

import pytest
from channels.db import database_sync_to_async

from sessions_app.services import files
from tests.sessions_app.files.helpers import png_bytes
from tests.sessions_app.web.consumers.conftest import (  # noqa: F401 - anyio_backend: a fixture
    anyio_backend,
    events_until,
    open_session,
    turn_done,
)

pytestmark = [pytest.mark.anyio, pytest.mark.django_db(transaction=True)]


def _uploaded(session_id: str, owner_id: int) -> str:
    content = png_bytes(30, 20)
    return files.file_upload(
        session_id=session_id,
        owner_id=owner_id,
        file=io.BytesIO(content),
        size=len(content),
        name="frame.png",
    ).id


async def test_a_prompt_frame_carries_attachments_into_the_users_message(
    backend, alice, alice_token
):
    ws, _first = await open_session("/ws/sessions/socket/", alice_token)
    file_id = await database_sync_to_async(_uploaded)("socket", alice.id)
    for mode in ("reject", "queue"):
        await ws.send_json_to(
            {"type": "prompt", "text": f"see ({mode})", "mode": mode, "attachments": [file_id]}
        )
        seen = await events_until(ws, turn_done)
        assert seen[-1]["status"] == "completed"
        (message,) = [
            e["entry"] for e in seen if e["type"] == "entry" and e["entry"]["role"] == "user"
        ]
        assert message["data"]["attachments"] == [
            {
                "id": file_id,
                "name": "frame.png",
                "mime": "image/png",
                "size": message["data"]["attachments"][0]["size"],
                "width": 30,
                "height": 20,
            }
        ]
    await ws.send_json_to({"type": "prompt", "text": "see", "attachments": ["f" * 64]})
    error = (await events_until(ws, lambda event: event["type"] == "error"))[-1]
    assert error["code"] == "unknown_attachment"
    await ws.disconnect()
