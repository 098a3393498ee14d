"""The same mistake answers with the same code through every door: the HTTP API, the socket's
frames and the slash commands each map a refused request (a DomainError) once, from the code
it carries (docs/design.md §7, §8)."""

import pytest
from asgiref.sync import sync_to_async

from sessions_app.web.commands import CommandError, command_run
from tests.builders import token_client

from .conftest import RECEIVE_TIMEOUT, open_session

pytestmark = [pytest.mark.anyio, pytest.mark.django_db(transaction=True)]


async def _http(api, method: str, path: str, body=None) -> tuple[int, dict]:
    response = await sync_to_async(getattr(api, method))(path, body, format="json")
    return response.status_code, response.json()


async def _socket_error(ws, frame: dict) -> dict:
    await ws.send_json_to(frame)
    answer = await ws.receive_json_from(timeout=RECEIVE_TIMEOUT)
    assert answer["type"] == "error", answer
    return answer


async def _slash_error(user, line: str, session_id: str = "work") -> CommandError:
    with pytest.raises(CommandError) as refused:
        await sync_to_async(command_run)(session_id=session_id, owner_id=user.id, line=line)
    return refused.value


async def test_a_bad_queue_id_is_the_same_mistake_over_http_and_the_socket(
    backend, alice, alice_token
):
    ws, _ = await open_session("/ws/sessions/work/", alice_token)
    api = await sync_to_async(token_client)(alice)

    for queue_id, status, code in [
        ("q-never-queued", 404, "not_found"),
        ("x" * 41, 400, "invalid"),
    ]:
        answer = await _http(api, "delete", f"/api/sessions/work/queue/{queue_id}/")
        frame = await _socket_error(ws, {"type": "queue_cancel", "queue_id": queue_id})

        assert (answer[0], answer[1]["code"], frame["code"]) == (status, code, code), queue_id
        assert frame["message"] == answer[1]["detail"]
    await ws.disconnect()


async def test_a_bad_model_and_an_unknown_session_are_the_same_mistakes_through_every_door(
    backend, alice, alice_token
):
    ws, _ = await open_session("/ws/sessions/work/", alice_token)
    api = await sync_to_async(token_client)(alice)

    status, body = await _http(api, "patch", "/api/sessions/work/", {"model": "gpt-4o"})
    frame = await _socket_error(ws, {"type": "prompt", "text": "/model gpt-4o"})
    refused = await _slash_error(alice, "/model gpt-4o")
    assert (status, body["code"], frame["code"], refused.code) == (400, *["bad_model"] * 3)

    status, body = await _http(api, "get", "/api/sessions/never-made/")
    frame = await _socket_error(ws, {"type": "prompt", "text": "/branch never-made"})
    # A command typed in a conversation that is gone (the terminal chat's, say).
    refused = await _slash_error(alice, "/help", session_id="never-made")
    assert (status, body["code"], frame["code"], refused.code) == (404, *["not_found"] * 3)
    assert refused.message == body["detail"]
    await ws.disconnect()
