"""WebSocket test helpers: the whole ASGI stack (origin check, cookie and token auth, routes)."""

import json

import pytest
from channels.layers import channel_layers
from channels.testing import WebsocketCommunicator

from tests.fakes.llm_server import serving_the_apps_model
from tests.helpers import GUARD_SEC

# The chat page's own origin: the handshake's Host, with ws:// as http://.
HOST = (b"host", b"127.0.0.1")
ORIGIN = (b"origin", b"http://127.0.0.1")
# Only a guard against hanging: a frame that is coming arrives long before it.
RECEIVE_TIMEOUT = GUARD_SEC


@pytest.fixture
def model(settings):
    """The app's model: a scripted OpenAI-compatible server, reached through the official SDK."""
    with serving_the_apps_model(settings) as server:
        yield server


@pytest.fixture(autouse=True)
def _fresh_channel_layer():
    # The in-memory layer keeps queues bound to the event loop of the test that made them.
    channel_layers.backends.clear()
    yield
    channel_layers.backends.clear()


def communicator(path, token=None, headers=()):
    from jarvis_site.asgi import application

    all_headers = [HOST, ORIGIN, *headers]
    if token:
        all_headers.append((b"authorization", f"Token {token}".encode()))
    return WebsocketCommunicator(application, path, headers=all_headers)


async def open_session(path, token):
    """Connect and return (communicator, the `session` event)."""
    ws = communicator(path, token)
    connected, _ = await ws.connect(timeout=RECEIVE_TIMEOUT)
    assert connected
    first = await ws.receive_json_from(timeout=RECEIVE_TIMEOUT)
    assert first["type"] == "session", first
    return ws, first


async def close_code(ws) -> int:
    """The close code the server sent (it accepts first, so the client can see it)."""
    connected, _ = await ws.connect(timeout=RECEIVE_TIMEOUT)
    assert connected
    message = await ws.receive_output(timeout=RECEIVE_TIMEOUT)
    assert message["type"] == "websocket.close", message
    return message["code"]


async def events_until(ws, predicate, limit=500):
    """Every event received up to and including the first for which predicate holds."""
    seen = []
    for _ in range(limit):
        event = await ws.receive_json_from(timeout=RECEIVE_TIMEOUT)
        seen.append(event)
        if predicate(event):
            return seen
    raise AssertionError(f"no matching event in {json.dumps(seen)[:2000]}")


def turn_done(event) -> bool:
    return event["type"] == "agent_end"


@pytest.fixture
def anyio_backend():
    return "asyncio"
