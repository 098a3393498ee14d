"""Live turns anyone can join (docs/design.md §17): a tab opened while the answer streams
gets the answer so far in its `session` frame (`running`), then exactly the later events, and
can stop the turn. The model is held mid-answer by the test (tests/fakes/llm_server.Hold)."""

import asyncio

import pytest
from channels.db import database_sync_to_async

from sessions_app.store import get_store
from tests.fakes.llm_server import Hold, Reply
from tests.handshakes import hold_waits
from tests.helpers import GUARD_SEC

from .conftest import events_until, open_session, turn_done

pytestmark = [pytest.mark.anyio, pytest.mark.django_db(transaction=True)]

WORDS = [f"w{n:03d}" for n in range(60)]
ANSWER = " ".join(WORDS)


async def held_mid_answer(model, session_id, token):
    """A tab whose turn streamed part of ANSWER and is held there: (tab, hold, its events)."""
    hold = Hold(words=30)
    model.script(Reply(text=ANSWER, hold=hold))
    tab, _ = await open_session(f"/ws/sessions/{session_id}/", token)
    await tab.send_json_to({"type": "prompt", "text": "count for me"})
    seen = await events_until(tab, lambda event: event["type"] == "delta")
    assert await asyncio.to_thread(hold.reached.wait, GUARD_SEC)
    return tab, hold, seen


async def stored_entries(session_id):
    return await database_sync_to_async(get_store().get_messages)(session_id)


def streamed_text(events) -> str:
    return "".join(event["text"] for event in events if event["type"] == "delta")


def turn_event_seqs(events, turn_id) -> list[int]:
    return [event["event_seq"] for event in events if event.get("turn_id") == turn_id]


async def test_a_tab_opened_mid_answer_shows_it_from_where_it_is_with_no_gap_or_repeat(
    backend, alice_token, model
):
    first, hold, first_seen = await held_mid_answer(model, "live-join", alice_token)
    turn_id = first_seen[0]["turn_id"]

    second, snapshot = await open_session("/ws/sessions/live-join/", alice_token)
    running = snapshot["running"]
    assert running["turn_id"] == turn_id
    assert running["text"] and ANSWER.startswith(running["text"])
    assert running["tools"] == []
    hold.release()
    later = await events_until(second, turn_done)
    first_seen += await events_until(first, turn_done)

    stored = [e for e in await stored_entries("live-join") if e.role == "assistant"]
    assert [e.content for e in stored] == [ANSWER]
    # The joined tab: the running text, then exactly the turn's later events.
    assert running["text"] + streamed_text(later) == ANSWER
    seqs = turn_event_seqs(later, turn_id)
    assert seqs == list(range(running["event_seq"] + 1, running["event_seq"] + 1 + len(seqs)))
    assert [e["entry"]["content"] for e in later if e["type"] == "entry"] == [ANSWER, ""]
    # The tab that sent the prompt: every event of the turn, numbered from 1 with no gap.
    assert turn_event_seqs(first_seen, turn_id) == list(range(1, len(first_seen) + 1))
    assert streamed_text(first_seen) == ANSWER
    await first.disconnect()
    await second.disconnect()


async def test_a_reloaded_tab_stops_the_turn_it_joined(backend, alice_token, model):
    first, hold, _ = await held_mid_answer(model, "live-stop", alice_token)
    await first.disconnect()  # the reload: the old page goes away

    reloaded, snapshot = await open_session("/ws/sessions/live-stop/", alice_token)
    assert snapshot["running"] is not None
    await reloaded.send_json_to({"type": "abort"})
    # Frames are handled in order: the pong says the abort has reached the turn.
    await reloaded.send_json_to({"type": "ping"})
    seen = await events_until(reloaded, lambda event: event["type"] == "pong")
    hold.release()  # the model goes on, but the turn stopped where it waited for it
    if not any(turn_done(event) for event in seen):
        seen += await events_until(reloaded, turn_done)
    end = [event for event in seen if turn_done(event)][-1]
    assert end["status"] == "aborted"
    stored = await stored_entries("live-stop")
    assert [e.data["status"] for e in stored if e.kind == "turn_end"] == ["aborted"]
    _, after = await open_session("/ws/sessions/live-stop/", alice_token)
    assert after["running"] is None
    await reloaded.disconnect()


async def test_a_tab_opened_while_a_tool_runs_sees_the_call_running(
    backend, alice_token, monkeypatch
):
    held = hold_waits(monkeypatch)  # the offline model's "wait" call, held inside the tool
    first, _ = await open_session("/ws/sessions/live-tool/", alice_token)
    await first.send_json_to({"type": "prompt", "text": "wait 0.1 seconds"})
    assert await asyncio.to_thread(held.started.wait, GUARD_SEC), "the turn never reached its tool"

    second, snapshot = await open_session("/ws/sessions/live-tool/", alice_token)
    (call,) = snapshot["running"]["tools"]
    stored_call = [e for e in snapshot["entries"] if e.get("tool_calls")][-1]["tool_calls"][0]
    assert (call["call_id"], call["name"]) == (stored_call["id"], "wait")
    assert call["arguments"] == stored_call["arguments"] and call["started_at"]
    held.release()
    later = await events_until(second, turn_done)
    results = [e["entry"] for e in later if e["type"] == "entry" and e["entry"]["role"] == "tool"]
    assert [r["tool_call_id"] for r in results] == [call["call_id"]]
    await events_until(first, turn_done)
    _, after = await open_session("/ws/sessions/live-tool/", alice_token)
    assert after["running"] is None
    await first.disconnect()
    await second.disconnect()
