"""Approvals on the socket: every tab of the session is asked, any tab answers, and a tab
opened (or reloaded) while a call waits finds the request in its `session` frame."""

import pytest
from channels.db import database_sync_to_async

from memory_app.services import working_memory_recall, working_memory_remember

from .conftest import RECEIVE_TIMEOUT, events_until, open_session, turn_done

pytestmark = [pytest.mark.anyio, pytest.mark.django_db(transaction=True)]

sync = database_sync_to_async


def asked(event) -> bool:
    return event["type"] == "approval_request"


async def test_a_reloaded_tab_sees_the_pending_request_and_its_answer_runs_the_tool(
    backend, alice_token
):
    first_tab, _ = await open_session("/ws/sessions/appr/", alice_token)
    await sync(working_memory_remember)(session_id="appr", key="color", value="blue")
    await first_tab.send_json_to({"type": "prompt", "text": "forget my color"})
    request = (await events_until(first_tab, asked))[-1]
    assert request["tool"] == "forget" and request["arguments"] == {"key": "color"}

    reloaded, snapshot = await open_session("/ws/sessions/appr/", alice_token)
    assert [(a["call_id"], a["tool"], a["turn_id"]) for a in snapshot["approvals"]] == [
        (request["call_id"], "forget", request["turn_id"])
    ]
    await reloaded.send_json_to({"type": "approval", "call_id": request["call_id"], "allow": True})
    seen = await events_until(first_tab, turn_done)
    ending = next(e for e in seen if e["type"] == "approval_end")
    assert ending == {
        "type": "approval_end",
        "turn_id": request["turn_id"],
        "call_id": request["call_id"],
        "status": "allowed",
        # The next event of the turn after the request (docs/design.md §17).
        "event_seq": request["event_seq"] + 1,
    }
    result = next(e["entry"] for e in seen if e["type"] == "entry" and e["entry"]["role"] == "tool")
    assert (result["content"], result["is_error"]) == ("forgot color", False)
    assert await sync(working_memory_recall)(session_id="appr") == {}
    assert (await events_until(reloaded, turn_done))[-1]["status"] == "completed"

    # Answering again, or a call that never asked, is an error frame; the socket stays open.
    await reloaded.send_json_to({"type": "approval", "call_id": request["call_id"], "allow": False})
    assert (await reloaded.receive_json_from(timeout=RECEIVE_TIMEOUT))["code"] == "approval_closed"
    await reloaded.send_json_to({"type": "approval", "call_id": "call_nope", "allow": True})
    assert (await reloaded.receive_json_from(timeout=RECEIVE_TIMEOUT))["code"] == "not_found"
    await first_tab.disconnect()
    await reloaded.disconnect()


async def test_a_malformed_approval_frame_is_a_bad_request(backend, alice_token):
    ws, _ = await open_session("/ws/sessions/appr2/", alice_token)
    for frame in (
        {"type": "approval"},
        {"type": "approval", "call_id": "c1", "allow": "yes"},
        {"type": "approval", "call_id": 7, "allow": True},
    ):
        await ws.send_json_to(frame)
        assert (await ws.receive_json_from(timeout=RECEIVE_TIMEOUT))["code"] == "bad_request"
    await ws.send_json_to({"type": "approval", "call_id": "c\x00", "allow": True})
    assert (await ws.receive_json_from(timeout=RECEIVE_TIMEOUT))["code"] == "invalid"
    await ws.send_json_to({"type": "ping"})
    assert (await ws.receive_json_from(timeout=RECEIVE_TIMEOUT))["type"] == "pong"
    await ws.disconnect()
