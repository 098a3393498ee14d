#!/usr/bin/env python
"""A failover drill on a running `make cluster`: Redis, then PostgreSQL, stopped for a few
seconds each while answers are in flight (docs/design.md §32, docs/deploy.md).

For each outage, CLIENTS sessions (one user each) have a tab on every worker, opened on the
workers' own ports so that each turn is watched from a worker that does not run it. One tab of
each session sends a prompt whose turn outlasts the outage's start (it waits WAIT_SEC in a
tool, then answers); once every turn has started, the service is stopped with the command given,
started again after `--outage-sec`, and the drill records:

- what each tab saw: the turn's end and its status, every `event_seq` in order or not, and
  whether its socket was closed (and with which code);
- what was stored: each turn's `turn_end` status and answer;
- `/readyz` of each worker while the service was away (the statuses it answered) and how long
  after the restart it answered 200 again;
- how long after the restart a new turn on each worker ran to its end.

Run it on the cluster's machine, with the cluster's environment (DATABASE_URL, REDIS_URL), and
the commands that stop and start your Redis and PostgreSQL:

    make cluster    # in one terminal
    .venv/bin/python scripts/failover_drill.py \\
        --redis-stop "systemctl stop redis-server" --redis-start "systemctl start redis-server" \\
        --pg-stop "systemctl stop postgresql" --pg-start "systemctl start postgresql"

Exits 1 if a tab lost its socket or missed a turn's end, or an answer that ended was not stored.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
RECEIVE_TIMEOUT = 120
WAIT_SEC = 3
PROBE_EVERY_SEC = 0.1


def setup_django() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "jarvis_site.settings")
    sys.path.insert(0, str(REPO))
    import django

    django.setup()


def readiness(base: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"{base}/readyz", timeout=5) as response:
            return response.status, json.loads(response.read())["status"]
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read()).get("status", "")
    except (urllib.error.URLError, ConnectionError, TimeoutError, ValueError):
        return 0, "no answer"


@dataclass
class Tab:
    worker: str
    runs: bool
    events: list[dict] = field(default_factory=list)
    closed: int | None = None  # the close code, if the server closed the socket

    def report(self, turn_id: str | None) -> str:
        mine = [e for e in self.events if turn_id is not None and e.get("turn_id") == turn_id]
        ends = [e for e in mine if e["type"] == "agent_end"]
        seqs = [e["event_seq"] for e in mine]
        gapless = bool(seqs) and seqs == list(range(seqs[0], seqs[0] + len(seqs)))
        end = ends[-1]["status"] if ends else "no end"
        closed = "open" if self.closed is None else f"closed {self.closed}"
        return f"{end}, {'gapless' if gapless else 'GAP'} ({len(seqs)} events), {closed}"


async def read_until_end(ws, tab: Tab, turn_started: asyncio.Event) -> None:
    from websockets.exceptions import ConnectionClosed

    try:
        while True:
            event = json.loads(await asyncio.wait_for(ws.recv(), RECEIVE_TIMEOUT))
            tab.events.append(event)
            if event["type"] == "agent_start":
                turn_started.set()
            if event["type"] == "agent_end":
                return
    except ConnectionClosed as closed:
        tab.closed = closed.rcvd.code if closed.rcvd else 1006
    except TimeoutError:
        pass


def connect(base: str, session_id: str, token: str):
    from websockets.asyncio.client import connect as ws_connect

    return ws_connect(
        f"ws://{base.removeprefix('http://')}/ws/sessions/{session_id}/",
        origin=base,
        additional_headers={"Authorization": f"Token {token}"},
        open_timeout=RECEIVE_TIMEOUT,
    )


async def session_turn(number, workers, session_id, token, started, tabs_out):
    """Open a tab on every worker; the tab on worker `number % len(workers)` sends the prompt.
    Reads every tab until its turn's end."""
    runner = number % len(workers)
    tabs = [Tab(base, index == runner) for index, base in enumerate(workers)]
    tabs_out.extend(tabs)
    sockets = [await opened(base, session_id, token) for base in workers]
    try:
        prompt = f"wait {WAIT_SEC} seconds, then what is {number}*7?"
        await sockets[runner].send(json.dumps({"type": "prompt", "text": prompt}))
        await asyncio.gather(
            *(read_until_end(ws, tab, started) for ws, tab in zip(sockets, tabs, strict=True))
        )
    finally:
        for ws in sockets:
            await ws.close()


async def opened(base: str, session_id: str, token: str):
    """A socket that read its snapshot; refused sockets (4503: Redis or the database away) are
    opened again after a moment, as the page does."""
    from websockets.exceptions import ConnectionClosed

    while True:
        ws = await connect(base, session_id, token)
        try:
            json.loads(await asyncio.wait_for(ws.recv(), RECEIVE_TIMEOUT))
            return ws
        except ConnectionClosed:
            await asyncio.sleep(PROBE_EVERY_SEC)


async def new_turn_sec(base: str, session_id: str, token: str, since: float) -> float | None:
    """Seconds from `since` until a new turn on `base` ended `completed` (None: it did not
    within RECEIVE_TIMEOUT). Tries again while the worker refuses the socket or the turn."""
    from websockets.exceptions import ConnectionClosed, InvalidStatus

    deadline = time.monotonic() + RECEIVE_TIMEOUT
    while time.monotonic() < deadline:
        try:
            async with connect(base, session_id, token) as ws:
                json.loads(await asyncio.wait_for(ws.recv(), RECEIVE_TIMEOUT))
                await ws.send(json.dumps({"type": "prompt", "text": "what is 6*7?"}))
                while True:
                    event = json.loads(await asyncio.wait_for(ws.recv(), RECEIVE_TIMEOUT))
                    if event["type"] == "error":
                        break  # refused for now (database_unavailable): again
                    if event["type"] == "agent_end" and event["status"] == "completed":
                        return time.monotonic() - since
                    if event["type"] == "agent_end":
                        break
        except (ConnectionClosed, InvalidStatus, OSError, TimeoutError):
            pass
        await asyncio.sleep(PROBE_EVERY_SEC)
    return None


async def watch_readiness(workers, seen: dict, stop: asyncio.Event) -> None:
    while not stop.is_set():
        for base in workers:
            status, name = await asyncio.to_thread(readiness, base)
            if status != 200:
                seen[base].add(f"{status} {name}")
        await asyncio.sleep(PROBE_EVERY_SEC)


async def ready_again_sec(base: str, since: float) -> float | None:
    deadline = time.monotonic() + RECEIVE_TIMEOUT
    while time.monotonic() < deadline:
        if (await asyncio.to_thread(readiness, base))[0] == 200:
            return time.monotonic() - since
        await asyncio.sleep(PROBE_EVERY_SEC)
    return None


def run(command: str) -> None:
    subprocess.run(command, shell=True, check=True)  # noqa: S602 - the operator's own command


async def outage(name, stop_cmd, start_cmd, outage_sec, workers, clients, tokens, run_id):
    sessions = [f"drill-{run_id}-{name}-{n}" for n in range(clients)]
    tabs: list[list[Tab]] = [[] for _ in range(clients)]
    starts = [asyncio.Event() for _ in range(clients)]
    turns = [
        asyncio.ensure_future(session_turn(n, workers, sessions[n], tokens[n], starts[n], tabs[n]))
        for n in range(clients)
    ]
    for started in starts:
        await asyncio.wait_for(started.wait(), RECEIVE_TIMEOUT)
    readiness_seen = {base: set() for base in workers}
    probing = asyncio.Event()
    prober = asyncio.ensure_future(watch_readiness(workers, readiness_seen, probing))
    await asyncio.to_thread(run, stop_cmd)
    stopped_at = time.monotonic()
    await asyncio.sleep(outage_sec)  # the outage itself: what the drill is about
    await asyncio.to_thread(run, start_cmd)
    back = time.monotonic()
    probing.set()
    await prober
    ready = await asyncio.gather(*(ready_again_sec(base, back) for base in workers))
    fresh = [f"drill-{run_id}-{name}-new-{i}" for i in range(len(workers))]
    new_turns = await asyncio.gather(
        *(
            new_turn_sec(base, session_id, tokens[i % len(tokens)], back)
            for i, (base, session_id) in enumerate(zip(workers, fresh, strict=True))
        )
    )
    await asyncio.gather(*turns, return_exceptions=True)
    return {
        "name": name,
        "away_sec": back - stopped_at,
        "sessions": sessions,
        "tabs": tabs,
        "readiness": readiness_seen,
        "ready_again": dict(zip(workers, ready, strict=True)),
        "new_turn": dict(zip(workers, new_turns, strict=True)),
    }


def stored_turn(session_id: str) -> tuple[str, bool]:
    """The session's first turn as stored: its `turn_end` status, and whether it has an answer."""
    from sessions_app.store import get_store

    entries = get_store().get_messages(session_id)
    ends = [entry.data.get("status") for entry in entries if entry.kind == "turn_end"]
    answered = any(entry.role == "assistant" and entry.content.strip() for entry in entries)
    return (ends[0] if ends else "not closed"), answered


def report(result: dict) -> bool:
    """Print one outage's results; True when nothing was lost."""
    ok = True
    print(f"\n## {result['name']} away {result['away_sec']:.1f} s\n")
    print("| session | tab on | runs it | what the tab saw | stored |")
    print("|---|---|---|---|---|")
    for session_id, tabs in zip(result["sessions"], result["tabs"], strict=True):
        runner = next((tab for tab in tabs if tab.runs), None)
        turn_id = next((e["turn_id"] for e in runner.events if "turn_id" in e), None)
        status, answered = stored_turn(session_id)
        stored = f"{status}{', answer stored' if answered else ', NO ANSWER'}"
        for tab in tabs:
            seen = tab.report(turn_id)
            ok &= tab.closed is None and "no end" not in seen and "GAP" not in seen
            print(
                f"| {session_id} | {tab.worker} | {'yes' if tab.runs else ''} | {seen} | {stored} |"
            )
        ok &= answered and status != "not closed"
    print("\n| worker | /readyz while away | ready again after (s) | new turn ended after (s) |")
    print("|---|---|---|---|")
    for base in result["ready_again"]:
        seen = ", ".join(sorted(result["readiness"][base])) or "always 200"
        ready, new = result["ready_again"][base], result["new_turn"][base]
        print(
            f"| {base} | {seen} | {'never' if ready is None else f'{ready:.2f}'} "
            f"| {'never' if new is None else f'{new:.2f}'} |"
        )
        ok &= new is not None
    return ok


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--state", default=str(REPO / "var" / "cluster" / "cluster.json"))
    parser.add_argument("--redis-stop", required=True, help="a shell command that stops Redis")
    parser.add_argument("--redis-start", required=True, help="... and starts it again")
    parser.add_argument("--pg-stop", required=True, help="a shell command that stops PostgreSQL")
    parser.add_argument("--pg-start", required=True, help="... and starts it again")
    parser.add_argument("--redis-outage-sec", type=float, default=4.0)
    parser.add_argument("--pg-outage-sec", type=float, default=6.0)
    args = parser.parse_args()
    state_file = Path(args.state)
    if not state_file.exists():
        print(f"no running cluster: {state_file} is missing (start one with `make cluster`)")
        return 2
    setup_django()
    from django.contrib.auth import get_user_model
    from django.db import connections
    from rest_framework.authtoken.models import Token

    workers = [f"http://127.0.0.1:{port}" for port in json.loads(state_file.read_text())["workers"]]
    run_id = uuid.uuid4().hex[:6]
    users = get_user_model().objects
    tokens = [
        Token.objects.create(user=users.create_user(f"drill-{run_id}-{n}")).key
        for n in range(args.clients)
    ]
    connections.close_all()  # the drill stops the database under it
    results = [
        asyncio.run(
            outage(
                "Redis",
                args.redis_stop,
                args.redis_start,
                args.redis_outage_sec,
                workers,
                args.clients,
                tokens,
                run_id,
            )
        ),
        asyncio.run(
            outage(
                "PostgreSQL",
                args.pg_stop,
                args.pg_start,
                args.pg_outage_sec,
                workers,
                args.clients,
                tokens,
                run_id,
            )
        ),
    ]
    print(f"failover drill on {len(workers)} workers, {args.clients} answers in flight each time")
    ok = all([report(result) for result in results])
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
