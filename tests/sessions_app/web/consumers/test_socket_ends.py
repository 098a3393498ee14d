"""However a socket ends — a send that fails because the client went away (the server then
closes with 1011 and never delivers `websocket.disconnect`), or the server cancelling the
consumer — it lets go of its session: the heartbeat stops and the connection row goes, so
the session can be deleted right away (docs/design.md §8)."""

import asyncio
import json

import pytest
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator

from sessions_app.models import LiveConnection
from sessions_app.services import connections
from sessions_app.store import get_store

from .conftest import HOST, ORIGIN, RECEIVE_TIMEOUT, open_session

pytestmark = [pytest.mark.anyio, pytest.mark.django_db(transaction=True)]

sync = database_sync_to_async


class ClientGone(ConnectionResetError):
    """What the server's send raises once the client's connection is gone."""


def transport_lost_on(frame_type: str):
    """The whole ASGI stack, behind a server whose transport is lost when it sends the first
    frame of `frame_type`: that send raises, as Daphne's does on a closing connection."""
    from jarvis_site.asgi import application

    async def app(scope, receive, send):
        async def send_until_lost(message):
            text = message.get("text") if message["type"] == "websocket.send" else None
            if text and json.loads(text).get("type") == frame_type:
                raise ClientGone("the client's connection was lost mid-send")
            await send(message)

        await application(scope, receive, send_until_lost)

    return app


async def ended(ws: WebsocketCommunicator) -> BaseException | None:
    """Wait for the consumer to end; what it ended with."""
    await asyncio.wait({ws.future}, timeout=RECEIVE_TIMEOUT)
    assert ws.future.done(), "the consumer did not end"
    return None if ws.future.cancelled() else ws.future.exception()


def delete(api, session_id):
    return api.delete(f"/api/sessions/{session_id}/")


async def test_a_socket_whose_send_fails_mid_turn_lets_its_session_be_deleted(
    backend, api, alice_token
):
    headers = [HOST, ORIGIN, (b"authorization", f"Token {alice_token}".encode())]
    ws = WebsocketCommunicator(transport_lost_on("entry"), "/ws/sessions/s1/", headers=headers)
    assert (await ws.connect(timeout=RECEIVE_TIMEOUT))[0]
    assert (await ws.receive_json_from(timeout=RECEIVE_TIMEOUT))["type"] == "session"
    await ws.send_json_to({"type": "prompt", "text": "what is 6*7?"})
    assert isinstance(await ended(ws), ClientGone)

    response = await sync(delete)(api, "s1")
    assert response.status_code == 200, response.content
    assert response.json() == {"deleted": True, "exports": []}
    assert await sync(get_store().get_meta)("s1") is None


async def test_a_cancelled_socket_lets_its_session_be_deleted(backend, api, alice_token):
    ws, _ = await open_session("/ws/sessions/s1/", alice_token)
    assert await sync(connections.live_connection_count)(session_id="s1") == 1
    ws.future.cancel()  # the server gave up on it (Daphne's application_close_timeout)
    assert await ended(ws) is None

    assert await sync(LiveConnection.objects.count)() == 0
    response = await sync(delete)(api, "s1")
    assert (response.status_code, response.json()) == (200, {"deleted": True, "exports": []})


async def test_a_failed_socket_no_longer_renews_its_row(backend, alice_token, monkeypatch):
    beats = []
    real_heartbeat = connections.connection_heartbeat

    def counted_heartbeat(**kwargs):
        beats.append(kwargs["channel_name"])
        return real_heartbeat(**kwargs)

    # Beats as fast as the event loop allows: a heartbeat left running would renew at once.
    monkeypatch.setattr(connections, "HEARTBEAT_SEC", 0)
    monkeypatch.setattr(connections, "connection_heartbeat", counted_heartbeat)
    headers = [HOST, ORIGIN, (b"authorization", f"Token {alice_token}".encode())]
    ws = WebsocketCommunicator(transport_lost_on("pong"), "/ws/sessions/s1/", headers=headers)
    assert (await ws.connect(timeout=RECEIVE_TIMEOUT))[0]
    assert (await ws.receive_json_from(timeout=RECEIVE_TIMEOUT))["type"] == "session"
    await ws.send_json_to({"type": "ping"})
    assert isinstance(await ended(ws), ClientGone)

    after_end = len(beats)
    # Other work of the loop and the database thread goes on; a live heartbeat would beat.
    for _ in range(20):
        await sync(LiveConnection.objects.count)()
        await asyncio.sleep(0)
    assert len(beats) == after_end
    assert await sync(LiveConnection.objects.count)() == 0


@pytest.mark.parametrize("expiry, joins_again", [(86400, False), (0, True)])
async def test_a_socket_joins_its_group_again_only_as_the_layer_would_forget_it(
    backend, alice_token, monkeypatch, expiry, joins_again
):
    """A layer forgets a group member after its `group_expiry`: a socket's heartbeat joins
    its session's group again at half of it — not at every beat, a Redis command per socket
    every few seconds under hundreds of open tabs."""
    from channels.layers import get_channel_layer

    layer = get_channel_layer()
    monkeypatch.setattr(layer, "group_expiry", expiry)
    joins = []
    real_group_add = layer.group_add

    async def counted_group_add(group, channel):
        joins.append(group)
        await real_group_add(group, channel)

    monkeypatch.setattr(layer, "group_add", counted_group_add)
    beats = asyncio.Semaphore(0)
    loop = asyncio.get_running_loop()
    real_heartbeat = connections.connection_heartbeat

    def counted_heartbeat(**kwargs):  # in the sockets pool's thread
        alive = real_heartbeat(**kwargs)
        loop.call_soon_threadsafe(beats.release)
        return alive

    monkeypatch.setattr(connections, "HEARTBEAT_SEC", 0)
    monkeypatch.setattr(connections, "connection_heartbeat", counted_heartbeat)
    ws, _ = await open_session("/ws/sessions/s1/", alice_token)
    for _ in range(3):
        async with asyncio.timeout(RECEIVE_TIMEOUT):
            await beats.acquire()
    await ws.disconnect()
    assert joins[0] == joins[-1]  # the session's group, whenever joined
    assert (len(joins) > 3) if joins_again else (len(joins) == 1)
