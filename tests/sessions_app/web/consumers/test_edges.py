"""The WebSocket at its edges: which pages may open it, which handshakes and frames it
refuses (and how), and what a turn's events carry."""

import json

import pytest
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.test import Client

from sessions_app.core import limits
from sessions_app.runtime.live import live
from sessions_app.services import broadcasts
from sessions_app.store import get_store

from .conftest import (
    RECEIVE_TIMEOUT,
    close_code,
    communicator,
    events_until,
    open_session,
    turn_done,
)

pytestmark = [pytest.mark.anyio, pytest.mark.django_db(transaction=True)]

sync = database_sync_to_async


async def handshake(token, host=None, origin=None, scheme=None):
    """Whether a handshake with these Host/Origin headers reaches the session."""
    from jarvis_site.asgi import application

    headers = [(b"authorization", f"Token {token}".encode())]
    if host is not None:
        headers.append((b"host", host.encode()))
    if origin is not None:
        headers.append((b"origin", origin.encode()))
    ws = WebsocketCommunicator(application, "/ws/sessions/s1/", headers=headers)
    if scheme:
        ws.scope["scheme"] = scheme
    connected, _ = await ws.connect(timeout=RECEIVE_TIMEOUT)
    if connected:
        assert (await ws.receive_json_from(timeout=RECEIVE_TIMEOUT))["type"] == "session"
        await ws.disconnect()
    return connected


# --- origins ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("host", "origin", "scheme", "allowed"),
    [
        ("127.0.0.1:18103", "http://127.0.0.1:18103", None, True),
        ("localhost", "http://localhost:80", None, True),
        ("127.0.0.1:18103", "https://127.0.0.1:18103", "wss", True),
        ("127.0.0.1:18103", "http://127.0.0.1:18109", None, False),
        ("127.0.0.1:18103", "https://127.0.0.1:18103", None, False),
        ("127.0.0.1:18103", "http://127.0.0.1:18103", "wss", False),
        ("127.0.0.1:18103", "http://evil.example", None, False),
        ("evil.example:18103", "http://evil.example:18103", None, False),
        ("127.0.0.1:18103", "null", None, False),
    ],
    ids=[
        "own origin",
        "default port spelled out",
        "wss page on https",
        "same host, another port",
        "another scheme",
        "http page on wss",
        "another site",
        "a host not in ALLOWED_HOSTS",
        "null origin",
    ],
)
async def test_only_the_sites_own_origin_opens_a_socket(
    backend, alice_token, host, origin, scheme, allowed
):
    assert await handshake(alice_token, host=host, origin=origin, scheme=scheme) is allowed


async def test_csrf_trusted_origins_are_accepted_by_scheme_host_and_port(
    backend, alice_token, settings
):
    settings.CSRF_TRUSTED_ORIGINS = ["https://chat.example.com", "https://*.corp.example"]
    host = "127.0.0.1:8000"
    assert await handshake(alice_token, host=host, origin="https://chat.example.com")
    assert await handshake(alice_token, host=host, origin="https://chat.example.com:443")
    assert await handshake(alice_token, host=host, origin="https://team.corp.example")
    assert not await handshake(alice_token, host=host, origin="https://chat.example.com:444")
    assert not await handshake(alice_token, host=host, origin="http://chat.example.com")
    assert not await handshake(alice_token, host=host, origin="https://corp.example.org")


async def test_a_program_without_an_origin_connects_with_its_token(backend, alice_token):
    # Browsers always send Origin; a program need not, and it still needs a token.
    from jarvis_site.asgi import application

    assert await handshake(alice_token, host="127.0.0.1:8000")
    anonymous = WebsocketCommunicator(
        application, "/ws/sessions/s1/", headers=[(b"host", b"127.0.0.1:8000")]
    )
    assert await close_code(anonymous) == 4401


# --- handshakes that ask for something impossible ---------------------------------------------


@pytest.mark.parametrize(
    "path",
    [
        "/ws/sessions/a%2Fb/",
        "/ws/sessions/a/b/",
        "/ws/nowhere/",
        "/ws/sessions/a%00b/",
        "/ws/sessions/s1/?agent=a%00b",
        "/ws/sessions/s1/?agent=" + "a" * (limits.AGENT_MAX_CHARS + 1),
        f"/ws/sessions/s1/?after_seq={2**63}",
        "/ws/sessions/s1/?after_seq=-1",
        "/ws/sessions/s1/?after_seq=soon",
    ],
)
async def test_an_impossible_handshake_closes_with_4400_and_creates_nothing(
    backend, alice_token, path
):
    assert await close_code(communicator(path, alice_token)) == 4400
    assert await sync(get_store().get_meta)("s1") is None


async def test_the_largest_after_seq_opens_with_no_entries(backend, alice_token):
    ws, first = await open_session(f"/ws/sessions/s1/?after_seq={limits.SEQ_MAX}", alice_token)
    assert first["entries"] == []
    await ws.disconnect()


# --- frames ---------------------------------------------------------------------------------


async def test_a_deeply_nested_frame_is_bad_request_and_the_socket_stays_open(backend, alice_token):
    ws, _ = await open_session("/ws/sessions/s1/", alice_token)
    for depth in (limits.JSON_MAX_DEPTH + 1, 100_000):
        await ws.send_to(text_data="[" * depth)
        event = await ws.receive_json_from(timeout=RECEIVE_TIMEOUT)
        assert event["type"] == "error" and event["code"] == "bad_request", event
    await ws.send_json_to({"type": "ping"})
    assert await ws.receive_json_from(timeout=RECEIVE_TIMEOUT) == {"type": "pong"}
    await ws.disconnect()


async def test_a_prompt_outside_the_limits_is_invalid_and_runs_nothing(backend, alice_token):
    ws, _ = await open_session("/ws/sessions/s1/", alice_token)
    for text in ("a\x00b", "x" * (limits.PROMPT_MAX_CHARS + 1), "  \n"):
        await ws.send_json_to({"type": "prompt", "text": text})
        event = await ws.receive_json_from(timeout=RECEIVE_TIMEOUT)
        assert event["type"] == "error" and event["code"] == "invalid", event
    assert (await sync(get_store().get_meta)("s1")).last_seq == 0
    await ws.send_json_to({"type": "prompt", "text": "what is 6*7?"})
    assert (await events_until(ws, turn_done))[-1]["status"] == "completed"
    await ws.disconnect()


# --- what a turn sends ---------------------------------------------------------------------


async def test_agent_end_names_the_last_seq_and_streamed_text_arrives_whole(backend, alice_token):
    ws, _ = await open_session("/ws/sessions/s1/", alice_token)
    prompt = "tell me " + " ".join(f"w{n}" for n in range(300))
    await ws.send_json_to({"type": "prompt", "text": prompt})
    events = await events_until(ws, turn_done)
    entries = [event["entry"] for event in events if event["type"] == "entry"]
    assert events[-1]["last_seq"] == entries[-1]["seq"] == len(entries)
    streamed = "".join(event["text"] for event in events if event["type"] == "delta")
    assert streamed == [e for e in entries if e["role"] == "assistant"][-1]["content"]
    await ws.disconnect()


class StepClock:
    """A clock the test moves by hand."""

    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


async def test_deltas_are_coalesced_to_one_per_interval_and_flushed_before_other_events(
    backend, alice, alice_token
):
    await sync(get_store().create)("s1", owner_id=alice.id)
    sent: list[dict] = []

    async def record(text):
        sent.append(json.loads(text))

    socket = live.LiveSocket("s1", record)
    assert await live.socket_join(socket) is None  # no turn runs
    await socket.go_live(None)
    clock = StepClock()
    on_event = broadcasts.turn_event_broadcaster("s1", clock=clock)

    await on_event({"type": "agent_start", "turn_id": "t1"})
    for piece in ("a", "b", "c"):  # within one interval: the first leaves, two wait
        await on_event({"type": "delta", "turn_id": "t1", "text": piece})
    clock.now += 2 * broadcasts.DELTA_INTERVAL_SEC
    await on_event({"type": "delta", "turn_id": "t1", "text": "d"})  # the interval is over
    await on_event({"type": "delta", "turn_id": "t1", "text": "e"})  # waits for the end
    await on_event({"type": "agent_end", "turn_id": "t1", "status": "completed", "last_seq": 0})
    await live.socket_leave(socket)

    assert sent == [
        {"type": "agent_start", "turn_id": "t1", "event_seq": 1},
        {"type": "delta", "turn_id": "t1", "text": "a", "event_seq": 2},
        {"type": "delta", "turn_id": "t1", "text": "bcd", "event_seq": 3},
        {"type": "delta", "turn_id": "t1", "text": "e", "event_seq": 4},
        {
            "type": "agent_end",
            "turn_id": "t1",
            "status": "completed",
            "last_seq": 0,
            "event_seq": 5,
        },
    ]


# --- /export --------------------------------------------------------------------------------


async def test_export_answers_with_a_download_link_that_outlives_the_session(
    backend, alice, alice_token, settings
):
    ws, _ = await open_session("/ws/sessions/rp-exp.1/", alice_token)
    await ws.send_json_to({"type": "prompt", "text": "/export md"})
    result = await ws.receive_json_from(timeout=RECEIVE_TIMEOUT)
    await ws.disconnect()
    assert result["type"] == "command_result", result
    url = "/api/me/exports/rp-exp_1.md/"
    assert result["data"] == {"filename": "rp-exp_1.md", "url": url}
    assert url in result["text"]
    assert str(settings.EXPORTS_DIR) not in str(result)

    def client():
        signed_in = Client()
        signed_in.force_login(alice)
        return signed_in

    # The seed's advice: export it, then delete it. The link still downloads the export.
    deleted = await sync(lambda: client().delete("/api/sessions/rp-exp.1/"))()
    assert deleted.json()["deleted"] is True
    assert [export["url"] for export in deleted.json()["exports"]] == [url]
    response = await sync(lambda: client().get(url))()
    assert response.status_code == 200
    assert response["Content-Disposition"] == 'attachment; filename="rp-exp_1.md"'
    assert b"rp-exp.1" in b"".join(response.streaming_content)
