"""docs/design.md §8 through the real ASGI stack: what a browser tab or a program on the socket sees."""

import pytest
from channels.db import database_sync_to_async

from sessions_app.core.signals import session_ended
from sessions_app.models import LiveConnection
from sessions_app.services import connections, deletion, notices
from sessions_app.store import NewEntry, get_store
from tests.handshakes import hold_waits

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


# --- connect -----------------------------------------------------------------------------


async def test_unauthenticated_is_closed_with_4401(backend, alice):
    assert await close_code(communicator("/ws/sessions/s1/")) == 4401
    assert await close_code(communicator("/ws/sessions/s1/", token="not-a-token")) == 4401


async def test_bad_id_is_closed_with_4400(backend, alice_token):
    assert await close_code(communicator("/ws/sessions/.hidden/", alice_token)) == 4400
    assert await close_code(communicator("/ws/sessions/" + "x" * 201 + "/", alice_token)) == 4400


async def test_another_users_session_is_closed_with_4404(backend, alice_token, bob):
    await sync(get_store().create)("bobs", owner_id=bob.id)
    assert await close_code(communicator("/ws/sessions/bobs/", alice_token)) == 4404
    assert not await sync(LiveConnection.objects.exists)()


async def test_a_foreign_origin_is_refused(backend, alice_token):
    from channels.testing import WebsocketCommunicator

    from jarvis_site.asgi import application

    ws = WebsocketCommunicator(
        application,
        "/ws/sessions/s1/",
        headers=[
            (b"origin", b"http://evil.example"),
            (b"authorization", f"Token {alice_token}".encode()),
        ],
    )
    connected, _ = await ws.connect(timeout=RECEIVE_TIMEOUT)
    assert not connected


async def test_connect_creates_the_session_with_the_agent_and_registers(
    backend, alice, alice_token
):
    ws, first = await open_session("/ws/sessions/work:1/?agent=librarian", alice_token)
    assert first["session"]["id"] == "work:1"
    assert first["session"]["agent"] == "librarian"
    assert first["entries"] == []
    meta = await sync(get_store().get_meta)("work:1")
    assert meta.owner_id == alice.id
    assert await sync(LiveConnection.objects.filter(session_id="work:1").count)() == 1
    await ws.disconnect()
    assert not await sync(LiveConnection.objects.exists)()


async def test_token_in_the_query_string_and_cookie_login_both_work(backend, alice, alice_token):
    ws = communicator(f"/ws/sessions/s1/?token={alice_token}")
    assert (await ws.connect(timeout=RECEIVE_TIMEOUT))[0]
    assert (await ws.receive_json_from(timeout=RECEIVE_TIMEOUT))["type"] == "session"
    await ws.disconnect()

    from django.test import Client

    client = Client()
    await sync(client.force_login)(alice)
    cookie = f"sessionid={client.cookies['sessionid'].value}".encode()
    ws = communicator("/ws/sessions/s1/", headers=[(b"cookie", cookie)])
    assert (await ws.connect(timeout=RECEIVE_TIMEOUT))[0]
    assert (await ws.receive_json_from(timeout=RECEIVE_TIMEOUT))["type"] == "session"
    await ws.disconnect()


async def test_history_on_connect_and_only_newer_entries_after_seq(backend, alice, alice_token):
    store = get_store()
    await sync(store.create)("s1", owner_id=alice.id)
    await sync(store.append)(
        "s1", [NewEntry(role="user", content=f"note {n}") for n in range(1, 5)]
    )
    ws, first = await open_session("/ws/sessions/s1/", alice_token)
    assert [entry["seq"] for entry in first["entries"]] == [1, 2, 3, 4]
    assert first["entries"][0]["content"] == "note 1"
    await ws.disconnect()
    ws, first = await open_session("/ws/sessions/s1/?after_seq=2", alice_token)
    assert [entry["seq"] for entry in first["entries"]] == [3, 4]
    assert first["session"]["last_seq"] == 4
    await ws.disconnect()


# --- turns -------------------------------------------------------------------------------


async def test_a_prompt_runs_a_turn_that_both_tabs_watch(backend, alice_token):
    tab1, _ = await open_session("/ws/sessions/s1/", alice_token)
    tab2, _ = await open_session("/ws/sessions/s1/", alice_token)
    await tab1.send_json_to({"type": "prompt", "text": "what is 6*7?"})
    seen1 = await events_until(tab1, turn_done)
    seen2 = await events_until(tab2, turn_done)
    assert seen1 == seen2
    kinds = [event["type"] for event in seen1]
    assert kinds[0] == "agent_start" and kinds[-1] == "agent_end"
    assert "delta" in kinds
    assert seen1[-1]["status"] == "completed"
    entries = [event["entry"] for event in seen1 if event["type"] == "entry"]
    assert [entry["seq"] for entry in entries] == sorted(entry["seq"] for entry in entries)
    assert entries[0]["kind"] == "turn_start"
    call = next(entry for entry in entries if entry.get("tool_calls"))
    result = next(entry for entry in entries if entry["role"] == "tool")
    assert result["tool_call_id"] == call["tool_calls"][0]["id"]
    assert "42" in result["content"]
    answer = [entry for entry in entries if entry["role"] == "assistant" and entry["content"]][-1]
    assert "42" in answer["content"]
    streamed = "".join(event["text"] for event in seen1 if event["type"] == "delta")
    assert "42" in streamed
    await tab1.disconnect()
    await tab2.disconnect()
    # A reconnect shows what was stored.
    again, first = await open_session("/ws/sessions/s1/", alice_token)
    assert [entry["seq"] for entry in first["entries"]] == [entry["seq"] for entry in entries]
    await again.disconnect()


async def test_a_second_prompt_during_a_turn_is_session_busy(
    backend, alice_token, settings, monkeypatch
):
    settings.BUSY_GRACE_SEC = 0.2
    held = hold_waits(monkeypatch)  # the first turn runs until the test lets it finish
    ws, _ = await open_session("/ws/sessions/s1/", alice_token)
    await ws.send_json_to({"type": "prompt", "text": "wait 0.1 seconds"})
    await events_until(ws, lambda event: event["type"] == "agent_start")
    await ws.send_json_to({"type": "prompt", "text": "are you there?"})
    seen = await events_until(ws, lambda event: event["type"] == "error")
    assert seen[-1] == {
        "type": "error",
        "code": "session_busy",
        "message": "the previous request is still being processed",
    }
    held.release()
    end = await events_until(ws, turn_done)
    assert end[-1]["status"] == "completed"
    await ws.disconnect()


async def test_abort_ends_the_running_turn(backend, alice_token):
    ws, _ = await open_session("/ws/sessions/s1/", alice_token)
    # 300 s: longer than the guard, so a turn that ends at all was ended by the abort.
    await ws.send_json_to({"type": "prompt", "text": "wait 300 seconds"})
    await events_until(
        ws, lambda event: event["type"] == "entry" and event["entry"].get("tool_calls")
    )
    await ws.send_json_to({"type": "abort"})
    seen = await events_until(ws, turn_done)
    assert seen[-1]["status"] == "aborted"
    results = [
        event["entry"]
        for event in seen
        if event["type"] == "entry" and event["entry"]["role"] == "tool"
    ]
    assert results and results[0]["is_error"]
    await ws.disconnect()


async def test_turns_of_two_sessions_run_side_by_side(backend, alice_token, monkeypatch):
    """A long turn must not hold up another session's socket (turns run in a thread pool)."""
    held = hold_waits(monkeypatch)  # the slow turn waits until the fast one has finished
    slow, _ = await open_session("/ws/sessions/slow/", alice_token)
    fast, _ = await open_session("/ws/sessions/fast/", alice_token)
    await slow.send_json_to({"type": "prompt", "text": "wait 0.1 seconds"})
    await events_until(
        slow, lambda event: event["type"] == "entry" and event["entry"].get("tool_calls")
    )
    await fast.send_json_to({"type": "prompt", "text": "what is 2+3?"})
    assert (await events_until(fast, turn_done))[-1]["status"] == "completed"
    held.release()
    await events_until(slow, turn_done)
    await slow.disconnect()
    await fast.disconnect()


# --- frames and commands -----------------------------------------------------------------


async def test_malformed_frames_get_bad_request_and_the_socket_stays_open(backend, alice_token):
    ws, _ = await open_session("/ws/sessions/s1/", alice_token)
    for frame in (
        "not json",
        "[1, 2]",
        '{"no": "type"}',
        '{"type": "dance"}',
        '{"type": "prompt"}',
    ):
        await ws.send_to(text_data=frame)
        event = await ws.receive_json_from(timeout=RECEIVE_TIMEOUT)
        assert event["type"] == "error" and event["code"] == "bad_request", event
    await ws.send_json_to({"type": "ping"})
    assert await ws.receive_json_from(timeout=RECEIVE_TIMEOUT) == {"type": "pong"}
    await ws.disconnect()


async def test_slash_commands(backend, alice, alice_token, settings):
    ws, _ = await open_session("/ws/sessions/work:1/", alice_token)
    await ws.send_json_to({"type": "prompt", "text": "what is 6*7?"})
    await events_until(ws, turn_done)

    async def command(line):
        await ws.send_json_to({"type": "prompt", "text": line})
        return await ws.receive_json_from(timeout=RECEIVE_TIMEOUT)

    help_ = await command("/help")
    assert help_["type"] == "command_result" and help_["command"] == "help"
    assert {"sessions", "branch", "help", "compact", "export", "cost"} <= set(
        help_["data"]["commands"]
    )

    branch = await command("/branch")
    assert branch["command"] == "branch"
    copy_id = branch["data"]["switch_to"]
    assert branch["data"]["session"]["id"] == copy_id != "work:1"
    assert branch["data"]["session"]["parent_id"] == "work:1"
    copied = await sync(get_store().get_messages)(copy_id)
    assert len(copied) == len(await sync(get_store().get_messages)("work:1"))

    listing = await command("/sessions")
    assert {row["id"] for row in listing["data"]["sessions"]} == {"work:1", copy_id}
    assert "← work:1" in listing["text"]

    export = await command("/export json")
    assert export["data"]["filename"] == "work_1.json"
    assert (settings.EXPORTS_DIR / str(alice.id) / "work_1.json").exists()
    assert (await command("/export pdf"))["code"] == "bad_request"

    cost = await command("/cost")
    assert cost["command"] == "cost"
    assert cost["data"]["output_tokens"] > 0

    nothing = await command("/compact")  # one turn: nothing older to summarize
    assert nothing == {
        "type": "error",
        "code": "nothing_to_compact",
        "message": "nothing to compact",
    }
    await ws.send_json_to({"type": "prompt", "text": "what is 1+1?"})
    await events_until(ws, turn_done)
    await ws.send_json_to({"type": "prompt", "text": "/compact"})
    # The compaction entry goes to every tab through the group; the result only to this one.
    seen = await events_until(ws, lambda event: event["type"] == "command_result")
    if not any(e["type"] == "entry" for e in seen):
        seen += await events_until(ws, lambda event: event["type"] == "entry")
    compaction = next(e["entry"] for e in seen if e["type"] == "entry")
    assert compaction["kind"] == "compaction" and compaction["data"]["summary"]

    unknown = await command("/frobnicate")
    assert unknown["type"] == "error" and unknown["code"] == "unknown_command"
    await ws.disconnect()


async def test_proactive_notices_reach_open_tabs(backend, alice, alice_token):
    ws, _ = await open_session("/ws/sessions/s1/", alice_token)
    await sync(notices.proactive_add)(session_id="s1", message_id="m1", content="Stand up!")
    event = await ws.receive_json_from(timeout=RECEIVE_TIMEOUT)
    assert event["type"] == "proactive"
    assert event["notice"]["content"] == "Stand up!"
    await sync(notices.proactive_add)(session_id="s1", message_id="m1", content="again")
    # Notices reach the tab in the order they were added: had the repeat been sent, it would
    # come before the next one.
    await sync(notices.proactive_add)(session_id="s1", message_id="m2", content="Sit down!")
    event = await ws.receive_json_from(timeout=RECEIVE_TIMEOUT)
    assert (event["type"], event["notice"]["message_id"]) == ("proactive", "m2"), event
    await ws.disconnect()


# --- live connections and delete ---------------------------------------------------------


async def test_delete_is_refused_while_connected_and_the_last_close_ends_the_session(
    backend, alice, alice_token
):
    ended = []

    def on_ended(sender, *, session_id, owner_id, **kwargs):
        ended.append((session_id, owner_id))

    session_ended.connect(on_ended)
    try:
        tab1, _ = await open_session("/ws/sessions/s1/", alice_token)
        tab2, _ = await open_session("/ws/sessions/s1/", alice_token)
        with pytest.raises(deletion.SessionConnected):
            await sync(deletion.session_delete)(session_id="s1", owner_id=alice.id)
        await tab1.disconnect()
        assert ended == []
        with pytest.raises(deletion.SessionConnected):
            await sync(deletion.session_delete)(session_id="s1", owner_id=alice.id)
        await tab2.disconnect()
        assert ended == [("s1", alice.id)]
        assert await sync(deletion.session_delete)(session_id="s1", owner_id=alice.id)
    finally:
        session_ended.disconnect(on_ended)


async def test_a_lapsed_registration_closes_the_socket_so_the_client_reconnects(
    backend, alice_token, monkeypatch
):
    monkeypatch.setattr(connections, "HEARTBEAT_SEC", 0.1)
    ws, _ = await open_session("/ws/sessions/s1/", alice_token)
    await sync(LiveConnection.objects.all().delete)()  # what the sweep does to a dead worker's rows
    message = await ws.receive_output(timeout=RECEIVE_TIMEOUT)
    assert message == {"type": "websocket.close", "code": 4408}


async def test_a_connection_after_a_delete_opens_a_new_empty_session(backend, alice, alice_token):
    ws, _ = await open_session("/ws/sessions/s1/", alice_token)
    await ws.send_json_to({"type": "prompt", "text": "what is 6*7?"})
    await events_until(ws, turn_done)
    await ws.disconnect()
    assert await sync(deletion.session_delete)(session_id="s1", owner_id=alice.id)
    ws, first = await open_session("/ws/sessions/s1/", alice_token)
    assert first["entries"] == [] and first["session"]["last_seq"] == 0
    await ws.disconnect()
