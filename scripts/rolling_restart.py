#!/usr/bin/env python
"""A rolling restart of a running `make cluster`, while sockets chat through its proxy.

CLIENTS sockets (one user and one session each) send prompts through the proxy, one after
the other, each prompt a turn that calls two tools. Meanwhile each worker in turn is sent
SIGTERM; the cluster starts it again, and the next worker is restarted once the new one
answers /readyz. The clients keep chatting until every worker was restarted and each has
sent a few more prompts. They behave as the web page does: a socket closed with 1012 is
opened again (the proxy picks a live worker) and reads the snapshot; a prompt refused with
`draining`, or sent into a socket that was closing, is sent again unless the snapshot shows it
stored.

Then every session's history is checked: each prompt stored exactly once, in order, each
turn ended `completed`, every tool call answered, and both providers' validators accept the
projection (sessions_app/runtime/context/history.py). Exits 1 if anything was lost or invalid.

Run it on the cluster's machine, with the cluster's environment (DATABASE_URL, REDIS_URL):

    make cluster                                  # in one terminal
    .venv/bin/python scripts/rolling_restart.py  # in another
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import os
import signal
import sys
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
RECEIVE_TIMEOUT = 60
AFTER_RESTART_PROMPTS = 3


def setup_django() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "jarvis_site.settings")
    sys.path.insert(0, str(REPO))
    import django

    django.setup()


def prompt_text(client: int, number: int) -> str:
    return f"prompt {number} of client {client}: wait 1 seconds, then what is {number}*7?"


def ready(base: str) -> bool:
    try:
        with urllib.request.urlopen(f"{base}/readyz", timeout=5) as response:
            return response.status == 200
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return False


class Tally:
    def __init__(self):
        self.answered = 0
        self.resent = 0
        self.close_codes: collections.Counter[int] = collections.Counter()
        self.reconnects = 0


async def chat(client, session_id, token, proxy, restarted, tally, sent_texts):
    """Send prompts until the restarts are over and AFTER_RESTART_PROMPTS more were answered."""
    from websockets.asyncio.client import connect
    from websockets.exceptions import ConnectionClosed, InvalidStatus

    host = proxy.removeprefix("http://")
    number, after = 0, 0
    pending: str | None = None
    while after < AFTER_RESTART_PROMPTS:
        try:
            async with connect(
                f"ws://{host}/ws/sessions/{session_id}/",
                origin=proxy,
                additional_headers={"Authorization": f"Token {token}"},
                open_timeout=RECEIVE_TIMEOUT,
            ) as ws:
                snapshot = json.loads(await asyncio.wait_for(ws.recv(), RECEIVE_TIMEOUT))
                stored = [e["content"] for e in snapshot["entries"] if e["role"] == "user"]
                ended = bool(snapshot["entries"]) and snapshot["entries"][-1]["kind"] == "turn_end"
                if pending is not None and pending in stored and not ended:
                    # Stored, its turn still running (on another worker): wait for its end.
                    await until_end(ws)
                    stored.append(pending)
                while after < AFTER_RESTART_PROMPTS:
                    if pending is None:
                        number += 1
                        pending = prompt_text(client, number)
                        sent_texts.append(pending)
                    elif pending in stored:
                        pending = None  # answered before the socket closed
                        tally.answered += 1
                        after += restarted.is_set()
                        continue
                    else:
                        tally.resent += 1
                    await ws.send(json.dumps({"type": "prompt", "text": pending}))
                    end = await until_end(ws)
                    if end is None:  # refused: this worker drains; send it again elsewhere
                        tally.close_codes[await until_closed(ws)] += 1
                        break
                    if end["status"] != "completed":
                        raise RuntimeError(f"{session_id}: a turn ended {end['status']}")
                    stored.append(pending)
                    pending = None
                    tally.answered += 1
                    after += restarted.is_set()
        except ConnectionClosed as closed:
            tally.close_codes[closed.rcvd.code if closed.rcvd else 1006] += 1
        except (InvalidStatus, OSError, TimeoutError):
            await asyncio.sleep(0.2)  # the proxy had no live worker for a moment
        tally.reconnects += 1


async def until_end(ws) -> dict | None:
    """The turn's `agent_end`, or None when the prompt was refused with `draining`."""
    while True:
        event = json.loads(await asyncio.wait_for(ws.recv(), RECEIVE_TIMEOUT))
        if event["type"] == "agent_end":
            return event
        if event["type"] == "error":
            if event["code"] == "draining":
                return None
            raise RuntimeError(f"error frame: {event}")


async def until_closed(ws) -> int:
    """Read to the end of the socket; the server's close code."""
    from websockets.exceptions import ConnectionClosed

    try:
        while True:
            await asyncio.wait_for(ws.recv(), RECEIVE_TIMEOUT)
    except ConnectionClosed as closed:
        return closed.rcvd.code if closed.rcvd else 1006


async def restart_each(state_file: Path, restarted: asyncio.Event, timings: list):
    """SIGTERM each worker, wait for its replacement to be ready, then the next one."""
    state = json.loads(state_file.read_text())
    await asyncio.sleep(2)  # let the clients get going first
    for port, pid in state["workers"].items():
        started = time.monotonic()
        os.kill(pid, signal.SIGTERM)
        base = f"http://127.0.0.1:{port}"
        while True:
            await asyncio.sleep(0.1)
            current = json.loads(state_file.read_text())["workers"].get(port)
            if current != pid and await asyncio.to_thread(ready, base):
                break
            if time.monotonic() - started > 120:
                raise RuntimeError(f"the worker on port {port} did not come back")
        timings.append((port, pid, current, time.monotonic() - started))
    restarted.set()


def check_history(session_id: str, sent: list[str]) -> list[str]:
    """What is wrong with a session's history (nothing: an empty list)."""
    from sessions_app.runtime.context.history import (
        HistoryInvalid,
        open_turn_id,
        project_anthropic,
        project_openai,
        unanswered_calls,
        validate_anthropic,
        validate_openai,
    )
    from sessions_app.store import get_store

    history = get_store().get_messages(session_id)
    problems = []
    stored = [entry.content for entry in history if entry.role == "user"]
    if stored != sent:
        lost = [text for text in sent if text not in stored]
        twice = [text for text in set(stored) if stored.count(text) > 1]
        problems.append(f"prompts lost {lost}, stored twice {twice}")
    statuses = [entry.data.get("status") for entry in history if entry.kind == "turn_end"]
    if statuses != ["completed"] * len(sent):
        problems.append(f"turn ends {collections.Counter(statuses)}")
    if unanswered_calls(history) or open_turn_id(history):
        problems.append("a tool call without its result, or a turn without its end")
    try:
        validate_openai(project_openai(history, "system"))
        validate_anthropic(project_anthropic(history, "system")[1])
    except HistoryInvalid as error:
        problems.append(f"invalid for a provider: {error}")
    return problems


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=20)
    parser.add_argument("--state", default=str(REPO / "var" / "cluster" / "cluster.json"))
    args = parser.parse_args()
    state_file = Path(args.state)
    if not state_file.exists():
        print(f"no running cluster: {state_file} is missing (start one with `make cluster`)")
        return 2
    setup_django()
    from django.contrib.auth import get_user_model
    from rest_framework.authtoken.models import Token

    proxy = json.loads(state_file.read_text())["proxy"]
    run = uuid.uuid4().hex[:6]
    # One user per client: each stays within the per-user turn rate and turn limit.
    tokens = [
        Token.objects.create(user=get_user_model().objects.create_user(f"rr-{run}-{client}")).key
        for client in range(args.clients)
    ]
    sessions = [f"rr-{run}-{client}" for client in range(args.clients)]
    sent: list[list[str]] = [[] for _ in range(args.clients)]
    tally, timings = Tally(), []

    async def scenario():
        restarted = asyncio.Event()
        await asyncio.gather(
            restart_each(state_file, restarted, timings),
            *(
                chat(
                    client, sessions[client], tokens[client], proxy, restarted, tally, sent[client]
                )
                for client in range(args.clients)
            ),
        )

    started = time.monotonic()
    asyncio.run(scenario())
    elapsed = time.monotonic() - started
    problems = {
        session_id: check_history(session_id, texts)
        for session_id, texts in zip(sessions, sent, strict=True)
    }
    bad = {session_id: found for session_id, found in problems.items() if found}

    print(f"rolling restart of {len(timings)} workers behind {proxy}, {args.clients} clients")
    print("| worker port | old pid | new pid | SIGTERM to ready again (s) |")
    print("|---|---|---|---|")
    for port, old, new, seconds in timings:
        print(f"| {port} | {old} | {new} | {seconds:.1f} |")
    prompts = sum(len(texts) for texts in sent)
    codes = ", ".join(f"{code}: {count}" for code, count in sorted(tally.close_codes.items()))
    print(f"prompts sent: {prompts} in {elapsed:.1f} s; answered: {tally.answered}")
    print(f"prompts sent again after a refusal or a close: {tally.resent}")
    print(f"sockets closed by the server, by close code: {codes or 'none'}")
    print(
        f"sessions checked: {len(sessions)}; with a lost prompt or an invalid history: {len(bad)}"
    )
    for session_id, found in bad.items():
        print(f"  {session_id}: {'; '.join(found)}")
    return 1 if bad or tally.answered != prompts else 0


if __name__ == "__main__":
    sys.exit(main())
