"""docs/design.md §18 on one worker: prompts sent while a turn runs — queued, steered,
interrupting — as the tabs of a session see them."""

import asyncio

import pytest
from channels.db import database_sync_to_async

from sessions_app.runtime.context.history import (
    project_anthropic,
    project_openai,
    validate_anthropic,
    validate_openai,
)
from sessions_app.store import get_store
from tests.handshakes import hold_waits
from tests.helpers import GUARD_SEC

from .conftest import events_until, open_session, turn_done

pytestmark = [pytest.mark.anyio, pytest.mark.django_db(transaction=True)]

sync = database_sync_to_async


def of_type(kind):
    return lambda event: event["type"] == kind


def all_seen(*predicates):
    """A predicate that holds once each of `predicates` has held for some event, in any order."""
    pending = list(predicates)

    def check(event) -> bool:
        pending[:] = [predicate for predicate in pending if not predicate(event)]
        return not pending

    return check


async def history_valid(session_id: str) -> list:
    """The stored history, after checking both providers would accept it."""
    entries = await sync(get_store().get_messages)(session_id)
    validate_openai(project_openai(entries, "system"))
    validate_anthropic(project_anthropic(entries, "system")[1])
    return entries


def a_tool_call(event) -> bool:
    return event["type"] == "entry" and bool(event["entry"].get("tool_calls"))


async def turns_ended(ws, count: int) -> list:
    seen = []
    for _ in range(count):
        seen += await events_until(ws, turn_done)
    return seen


async def test_three_prompts_queued_behind_a_running_turn_run_in_order(
    backend, alice_token, monkeypatch
):
    held = hold_waits(monkeypatch)
    ws, _ = await open_session("/ws/sessions/s1/", alice_token)
    await ws.send_json_to({"type": "prompt", "text": "wait 0.1 seconds"})
    await events_until(ws, lambda event: event["type"] == "agent_start")
    queued = []
    for text in ("what is 1+1", "what is 2+2", "what is 3+3"):
        await ws.send_json_to({"type": "prompt", "text": text, "mode": "queue"})
        queued.append((await events_until(ws, of_type("queued")))[-1])
    assert [(item["text"], item["position"]) for item in queued] == [
        ("what is 1+1", 0),
        ("what is 2+2", 1),
        ("what is 3+3", 2),
    ]
    # A tab opened now sees the queue in its snapshot.
    other, snapshot = await open_session("/ws/sessions/s1/", alice_token)
    assert [item["text"] for item in snapshot["queue"]] == [
        "what is 1+1",
        "what is 2+2",
        "what is 3+3",
    ]
    await other.disconnect()
    held.release()
    seen = await turns_ended(ws, 4)
    starts = [event for event in seen if event["type"] == "agent_start"]
    assert [start.get("queue_id") for start in starts[-3:]] == [item["queue_id"] for item in queued]
    assert [event["status"] for event in seen if event["type"] == "agent_end"] == ["completed"] * 4
    entries = await history_valid("s1")
    asked = [entry.content for entry in entries if entry.role == "user"]
    assert asked == ["wait 0.1 seconds", "what is 1+1", "what is 2+2", "what is 3+3"]
    answers = [entry.content for entry in entries if entry.role == "assistant" and entry.content]
    assert [answer.rstrip(".").rsplit(" ", 1)[-1] for answer in answers[-3:]] == ["2", "4", "6"]
    await ws.disconnect()


async def test_a_steer_reaches_the_running_turn_and_the_model_answers_it(
    backend, alice_token, monkeypatch
):
    held = hold_waits(monkeypatch)
    ws, _ = await open_session("/ws/sessions/s1/", alice_token)
    await ws.send_json_to({"type": "prompt", "text": "wait 4 seconds"})
    start = (await events_until(ws, of_type("agent_start")))[-1]
    # The turn is inside its tool: the steer cannot reach the first model call, which would
    # then answer it at once (and its entry would come before the `queued` reply).
    assert await asyncio.to_thread(held.started.wait, GUARD_SEC), "the turn never reached its tool"
    await ws.send_json_to({"type": "prompt", "text": "what is 5+6", "mode": "steer"})
    steer = (await events_until(ws, of_type("queued")))[-1]
    assert steer["mode"] == "steer"
    held.release()
    seen = await events_until(ws, turn_done)
    assert seen[-1] == {**seen[-1], "turn_id": start["turn_id"], "status": "completed"}
    steered = [
        event["entry"]
        for event in seen
        if event["type"] == "entry" and (event["entry"]["data"] or {}).get("steer")
    ]
    assert [(entry["content"], entry["turn_id"]) for entry in steered] == [
        ("what is 5+6", start["turn_id"])
    ]
    assert steered[0]["data"]["queue_id"] == steer["queue_id"]
    entries = await history_valid("s1")
    assert "11" in entries[-2].content  # the turn's last answer, before its turn_end
    assert [entry.kind for entry in entries].count("turn_start") == 1
    await ws.disconnect()


async def test_an_interrupt_aborts_the_turn_and_runs_next(backend, alice_token):
    ws, _ = await open_session("/ws/sessions/s1/", alice_token)
    # 300 s: longer than the guard, so a turn that ends at all was ended by the interrupt.
    await ws.send_json_to({"type": "prompt", "text": "wait 300 seconds"})
    await events_until(
        ws, lambda event: event["type"] == "entry" and event["entry"].get("tool_calls")
    )
    await ws.send_json_to({"type": "prompt", "text": "what is 2+3", "mode": "interrupt"})
    seen = await turns_ended(ws, 2)
    assert [event["status"] for event in seen if event["type"] == "agent_end"] == [
        "aborted",
        "completed",
    ]
    entries = await history_valid("s1")
    assert [entry.content for entry in entries if entry.role == "user"][-1] == "what is 2+3"
    assert "5" in entries[-2].content
    await ws.disconnect()


async def test_an_interrupt_still_works_when_twenty_prompts_wait(backend, alice_token, settings):
    settings.MAX_QUEUED_PER_SESSION = 20
    ws, _ = await open_session("/ws/sessions/s1/", alice_token)
    # 300 s: longer than the guard, so a turn that ends at all was ended by the test.
    await ws.send_json_to({"type": "prompt", "text": "wait 300 seconds"})
    await events_until(ws, a_tool_call)
    waiting = []
    for number in range(20):
        await ws.send_json_to({"type": "prompt", "text": f"what is {number}+1", "mode": "queue"})
        waiting.append((await events_until(ws, of_type("queued")))[-1]["queue_id"])
    await ws.send_json_to({"type": "prompt", "text": "one more", "mode": "queue"})
    assert (await events_until(ws, of_type("error")))[-1]["code"] == "queue_full"

    await ws.send_json_to({"type": "prompt", "text": "wait 299 seconds", "mode": "interrupt"})
    # `queued` comes from the queue and the turns' events from the turns: a tab may get
    # `queued` before or after the aborted turn's end (docs/design.md §18).
    seen = await events_until(ws, all_seen(of_type("queued"), turn_done, a_tool_call))
    queued = next(event for event in seen if event["type"] == "queued")
    assert (queued["text"], queued["position"]) == ("wait 299 seconds", 0)
    ended = next(index for index, event in enumerate(seen) if turn_done(event))
    assert seen[ended]["status"] == "aborted"
    # The interrupt's prompt runs next, ahead of the twenty; held in its wait, the test
    # cancels them and stops it.
    assert any(a_tool_call(event) for event in seen[ended:])
    for queue_id in waiting:
        await ws.send_json_to({"type": "queue_cancel", "queue_id": queue_id})
        await events_until(ws, of_type("queue_cancelled"))
    await ws.send_json_to({"type": "abort"})
    assert (await events_until(ws, turn_done))[-1]["status"] == "aborted"
    entries = await history_valid("s1")
    assert [entry.content for entry in entries if entry.role == "user"] == [
        "wait 300 seconds",
        "wait 299 seconds",
    ]
    await ws.disconnect()


async def test_a_queued_prompt_cancelled_from_another_tab_never_runs(
    backend, alice_token, monkeypatch
):
    held = hold_waits(monkeypatch)
    ws, _ = await open_session("/ws/sessions/s1/", alice_token)
    other, _ = await open_session("/ws/sessions/s1/", alice_token)
    await ws.send_json_to({"type": "prompt", "text": "wait 0.1 seconds"})
    await events_until(ws, of_type("agent_start"))
    await ws.send_json_to({"type": "prompt", "text": "what is 1+1", "mode": "queue"})
    await ws.send_json_to({"type": "prompt", "text": "what is 2+2", "mode": "queue"})
    first = (await events_until(other, of_type("queued")))[-1]
    await events_until(other, of_type("queued"))
    await other.send_json_to({"type": "queue_cancel", "queue_id": first["queue_id"]})
    cancelled = (await events_until(ws, of_type("queue_cancelled")))[-1]
    assert cancelled["queue_id"] == first["queue_id"]
    held.release()
    await turns_ended(ws, 2)
    entries = await history_valid("s1")
    assert [entry.content for entry in entries if entry.role == "user"] == [
        "wait 0.1 seconds",
        "what is 2+2",
    ]
    await other.disconnect()
    await ws.disconnect()


async def test_bad_mode_and_full_queue_are_refused(backend, alice_token, settings, monkeypatch):
    settings.MAX_QUEUED_PER_SESSION = 1
    held = hold_waits(monkeypatch)
    ws, _ = await open_session("/ws/sessions/s1/", alice_token)
    await ws.send_json_to({"type": "prompt", "text": "hi", "mode": "later"})
    error = (await events_until(ws, of_type("error")))[-1]
    assert error["code"] == "bad_request"
    await ws.send_json_to({"type": "prompt", "text": "wait 0.1 seconds"})
    await events_until(ws, of_type("agent_start"))
    await ws.send_json_to({"type": "prompt", "text": "one", "mode": "queue"})
    await events_until(ws, of_type("queued"))
    await ws.send_json_to({"type": "prompt", "text": "two", "mode": "queue"})
    error = (await events_until(ws, of_type("error")))[-1]
    assert error["code"] == "queue_full"
    held.release()
    await turns_ended(ws, 2)
    await ws.disconnect()


async def test_the_snapshot_of_a_full_queue_of_long_prompts_fits_one_frame(
    backend, alice_token, settings, monkeypatch
):
    settings.MAX_QUEUED_PER_SESSION = 20
    held = hold_waits(monkeypatch)
    ws, _ = await open_session("/ws/sessions/s1/", alice_token)
    await ws.send_json_to({"type": "prompt", "text": "wait 0.1 seconds"})
    await events_until(ws, of_type("agent_start"))
    long = "x" * 90_000
    for _ in range(20):
        await ws.send_json_to({"type": "prompt", "text": long, "mode": "queue"})
        await events_until(ws, of_type("queued"))
    other, snapshot = await open_session("/ws/sessions/s1/", alice_token)
    assert len(snapshot["queue"]) == 20
    assert all(item["truncated"] and long.startswith(item["text"]) for item in snapshot["queue"])
    # Cancelled from the tab that just opened: none of them runs.
    for item in snapshot["queue"]:
        await other.send_json_to({"type": "queue_cancel", "queue_id": item["queue_id"]})
        await events_until(other, of_type("queue_cancelled"))
    await other.disconnect()
    held.release()
    seen = await events_until(ws, turn_done)
    assert [event["type"] for event in seen].count("queue_cancelled") == 20
    entries = await history_valid("s1")
    assert [entry.content for entry in entries if entry.role == "user"] == ["wait 0.1 seconds"]
    await ws.disconnect()
