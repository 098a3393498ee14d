"""Turn load benchmark: hundreds of slow-model turns at once over WebSocket, beside a peer.

`make bench-turns` runs this script. For each configuration it starts, on loopback only:

- a fake OpenAI-compatible server (tests/fakes/paced_server.py, the rules of tests/fakes/
  llm_server.py on one event loop) in a process of its own, whose streamed answer takes
  `--latency` seconds and arrives in `--chunks` pieces (paced against a deadline, so the model
  time of every turn is known exactly);
- the project's own servers, real Daphne (`one`: one worker, SQLite, in-memory channel layer;
  `two`: two workers, PostgreSQL and Redis), on a scratch database this script migrates,
  pointed at the fake with `JARVIS_MODEL=openai:<m>` and `OPENAI_BASE_URL`;

then opens N sockets (one user each, so per-user limits never refuse the load), sends every
prompt at once and reads until each turn's `agent_end`. While the load runs, a short turn
("what is 2+3", answered at once by the fake) goes to one more session, and the first
session's turn is aborted; with two workers the second session's turn is aborted too, from a
socket on the worker that does not run it. The same workload then runs on the peer,
openai-agents' `Runner` with its `SQLiteSession` (one) or `SQLAlchemySession` on PostgreSQL
(two), at the same concurrency against the same fake (bench/peer_load.py, in its own
virtualenv).

Each of `one` and `two` runs twice, each time on a fresh database and fresh workers: once
with every session on `JARVIS_MODEL`, once (the `jarvis, session model` row) with every
session's own model chosen as the picker does (`PATCH /api/sessions/<id>/ {"model":
"openai:<another>"}`) before the storm, that model listed in `JARVIS_MODELS` — docs/design.md
§26 wants both on the same path, and the two rows side by side show whether they are.

The `single` row is one client on one worker (SQLite, offline model): "what is 2+3" turns,
one after another, timed from the prompt frame to `agent_end`.

Overhead is (agent_end received − prompt sent) − the model's latency. Every loop is bounded
in count and time (`--timeout` per run); every process started here is stopped here.
The script exits 0 even when a target is missed: it reports, it does not gate.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
BENCH = Path(__file__).resolve().parent
PG_SERVER_URL = os.environ.get("BENCH_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432")
PG_BENCH_DB = "jarvis_bench_turns"
REDIS_URL = os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/8")
PEER_PYTHON = BENCH / ".venv-peer" / "bin" / "python"
MODEL = "bench-model"
# The model every session picks in the second run of `one` and `two` (the fake answers any).
SESSION_MODEL = "bench-picked"
SHORT_PROMPT = "what is 2+3"
LONG_PROMPT = "tell me a long story"
DEFAULT_SESSIONS = {"one": 200, "two": 400, "storm-one": 200, "storm-two": 200}
WORKERS = {"one": 1, "two": 2, "storm-one": 1, "storm-two": 2}
STARTUP_TIMEOUT_SEC = 60
CONNECTS_AT_ONCE = 10
RECONNECT_ATTEMPTS = 6
# While turns run, some socket gets a frame every few milliseconds; this long a silence
# means the turns still open will not end.
QUIET_SEC = 20
# The abort (and the Stop from the other worker) leaves this long after the storm's first
# prompt; so do the short turns at the earliest.
SHORT_AFTER_SEC = 0.5
# Short turns, each in a session (and for a person) of its own, the first once every turn of
# the storm streams (§26: a short turn "under 200 streamed answers") and each next one
# SHORT_SPACING_SEC later: each arrives alone, as a person's does (a worker starts at most
# one turn per 50 ms as its frame is read, consumers.START_AT_ONCE_EVERY_SEC; five sent
# together measured the four that queued behind it). Sent at a fixed 0.5 s, the first one
# came, with two workers, while the worker was still reading the storm's own prompts: it
# was one prompt among 201, served in its turn, 0.2 or 1.6 s by the luck of the moment,
# and the row compared that luck (docs/performance.md). The row shows their median: one
# turn of tens of milliseconds is too few to compare two rows by.
SHORT_TURNS = 5
SHORT_SPACING_SEC = 0.1
# The short turns wait at most this long for the storm to stream.
STREAMING_WAIT_SEC = 10.0
# The buckets of jarvis_event_loop_lag_seconds (jarvis_site/shared/metrics.py): the peer's loop lag
# is put in the same ones, so that both p99s read alike (a bucket's upper bound).
LAG_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)
SINGLE_TURNS = 60
SINGLE_WARMUP = 5
SINGLE_TURNS_PER_SESSION = 20

TARGETS = {
    "wall": "<= latency + 1.5 s",
    "p99": "<= 500 ms",
    "short": "<= 300 ms",
    "abort": "<= 300 ms, aborted",
    "rss": "<= 1 MB",
    "single": "<= 15 ms",
}


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# --- processes: the fake model, Daphne, the scratch database ----------------------------


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def fake_server_main(latency: float, chunks: int) -> int:
    """Child: serve the fake model until stdin closes (the parent exiting closes it too)."""
    sys.path.insert(0, str(REPO))
    from tests.fakes.llm_server import Reply
    from tests.fakes.paced_server import PacedStreamServer

    long_text = " ".join(f"word{index}" for index in range(chunks))

    def respond(body: dict) -> Reply:
        last = json.dumps(body.get("messages", [])[-1:])
        if SHORT_PROMPT in last:
            return Reply(text="5")
        return Reply(text=long_text, latency=latency)

    with PacedStreamServer(respond) as server:
        print(server.openai_url, flush=True)
        while sys.stdin.readline().strip() == "lateness":
            # How late the fake itself was: a model slower than asked would count as overhead.
            lateness, server.lateness = server.lateness, []
            print(json.dumps({"streams": len(lateness), "p99_ms": p99_ms(lateness)}), flush=True)
    return 0


def p99_ms(seconds: list[float]) -> float | None:
    return None if not seconds else percentile([value * 1000 for value in seconds], 99)


@dataclass
class FakeModel:
    url: str
    process: subprocess.Popen

    def lateness(self) -> dict:
        """The fake's own lateness since the last call: its streams and their p99."""
        self.process.stdin.write("lateness\n")
        self.process.stdin.flush()
        return json.loads(self.process.stdout.readline())


@contextlib.contextmanager
def fake_model(latency: float, chunks: int):
    process = subprocess.Popen(
        [sys.executable, __file__, "--fake-server", f"--latency={latency}", f"--chunks={chunks}"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        url = process.stdout.readline().strip()
        if not url.startswith("http://127.0.0.1:"):
            raise RuntimeError("the fake model server did not start")
        yield FakeModel(url, process)
    finally:
        # Closing stdin lets it close its server and end on its own; a terminate while it
        # does would cut its loop off mid-way.
        process.stdin.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=15)
        stop(process)


def stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=5)


def app_env(scratch: Path, database_url: str, **extra) -> dict:
    env = dict(os.environ)
    for name in (
        "REDIS_URL",
        "ASGI_THREADS",
        "JARVIS_MODEL",
        "JARVIS_MODELS",
        "TITLE_MODEL",
        "OPENAI_BASE_URL",
    ):
        env.pop(name, None)
    env.update(
        DJANGO_SETTINGS_MODULE="jarvis_site.settings",
        DATABASE_URL=database_url,
        SESSIONS_DIR=str(scratch / "sessions"),
        EXPORTS_DIR=str(scratch / "exports"),
        ALLOWED_HOSTS="127.0.0.1,localhost",
        LOG_LEVEL="WARNING",
        OPENAI_API_KEY="bench",
    )
    env.update({key: str(value) for key, value in extra.items()})
    return env


def prepare_main(users: int) -> int:
    """Child: migrate the scratch database and create `users` users with API tokens."""
    sys.path.insert(0, str(REPO))
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.contrib.auth.hashers import make_password
    from django.core.management import call_command
    from rest_framework.authtoken.models import Token

    call_command("migrate", verbosity=0, interactive=False)
    user_model = get_user_model()
    unusable = make_password(None)  # hashing a real password per user would take minutes
    created = user_model.objects.bulk_create(
        [user_model(username=f"bench-{index:05d}", password=unusable) for index in range(users)]
    )
    tokens = Token.objects.bulk_create(
        [Token(key=Token.generate_key(), user=user) for user in created]
    )
    print(json.dumps([token.key for token in tokens]))
    return 0


def prepare(env: dict, users: int) -> list[str]:
    done = subprocess.run(
        [sys.executable, __file__, f"--prepare={users}"],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        text=True,
        timeout=300,
        check=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def profiled_daphne_main(output: str, daphne_args: list[str]) -> int:
    """Child: Daphne under cProfile; SIGTERM stops its reactor, then the profiles are written.

    cProfile sees one thread only. The event loop's thread, where turns run, is written to
    `output`; the work the consumer hands to pool threads (`_run_in_turn_thread`) is profiled
    call by call and written to `output`.turns.
    """
    import cProfile
    import pstats
    import threading

    from daphne.cli import CommandLineInterface

    sys.path.insert(0, str(REPO))
    import django

    django.setup()
    from sessions_app.web import consumers

    turns: list[pstats.Stats] = []
    turns_lock = threading.Lock()
    run_in_turn_thread = consumers._run_in_turn_thread

    def profiled(function, **kwargs):
        profile = cProfile.Profile()
        try:
            return profile.runcall(run_in_turn_thread, function, **kwargs)
        finally:
            with turns_lock:
                turns.append(pstats.Stats(profile))

    consumers._run_in_turn_thread = profiled
    profiler = cProfile.Profile()
    profiler.enable()
    try:
        CommandLineInterface().run(daphne_args)
    finally:
        profiler.disable()
        profiler.dump_stats(output)
        if turns:
            combined = turns[0]
            for stats in turns[1:]:
                combined.add(stats)
            combined.dump_stats(output + ".turns")
    return 0


@dataclass
class Worker:
    base: str
    process: subprocess.Popen

    @property
    def pid(self) -> int:
        return self.process.pid


@contextlib.contextmanager
def daphne(env: dict, log_path: Path, profile: str | None = None):
    port = free_port()
    args = ["-b", "127.0.0.1", "-p", str(port), "jarvis_site.asgi:application"]
    command = (
        [sys.executable, __file__, f"--profiled-daphne={profile}", "--", *args]
        if profile
        else [sys.executable, "-m", "daphne", *args]
    )
    with open(log_path, "w") as log_file:
        process = subprocess.Popen(
            command, cwd=REPO, env=env, stdout=log_file, stderr=subprocess.STDOUT
        )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + STARTUP_TIMEOUT_SEC
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"daphne exited with {process.returncode}: see {log_path}")
            try:
                urllib.request.urlopen(base + "/accounts/login/", timeout=2).close()
                break
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                if time.monotonic() > deadline:
                    raise RuntimeError("daphne did not answer in time") from None
                time.sleep(0.2)
        yield Worker(base, process)
    finally:
        stop(process)


def log_tail(path: Path, lines: int = 15) -> None:
    """The worker's last warnings and errors, for a run that lost turns or sockets."""
    kept = [line for line in path.read_text(errors="replace").splitlines() if " - - [" not in line]
    kept = [line for line in kept if "HTTP Request:" not in line]
    log(f"  last lines of {path.name}:")
    for line in kept[-lines:]:
        log(f"    {line}")


def postgres_create() -> str | None:
    try:
        import psycopg

        with psycopg.connect(f"{PG_SERVER_URL}/postgres", autocommit=True, connect_timeout=3) as db:
            db.execute(f"DROP DATABASE IF EXISTS {PG_BENCH_DB} WITH (FORCE)")
            db.execute(f"CREATE DATABASE {PG_BENCH_DB}")
    except Exception as error:  # noqa: BLE001 - any failure means "skip this configuration"
        log(f"PostgreSQL unavailable on {PG_SERVER_URL}: {error}")
        return None
    return f"{PG_SERVER_URL}/{PG_BENCH_DB}"


def postgres_drop() -> None:
    import psycopg

    with psycopg.connect(f"{PG_SERVER_URL}/postgres", autocommit=True, connect_timeout=3) as db:
        db.execute(f"DROP DATABASE IF EXISTS {PG_BENCH_DB} WITH (FORCE)")


def redis_reachable() -> bool:
    import redis

    try:
        redis.Redis.from_url(REDIS_URL, socket_connect_timeout=3).ping()
    except redis.RedisError as error:
        log(f"Redis unavailable on {REDIS_URL}: {error}")
        return False
    return True


def memory_kb(pid: int, field_name: str = "VmRSS") -> int:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith(field_name + ":"):
                return int(line.split()[1])
    return 0


# --- the load: N sockets, one prompt each, all at once ----------------------------------


def loop_lag_buckets(base: str) -> dict[float, float]:
    """A worker's jarvis_event_loop_lag_seconds histogram: cumulative count per bucket."""
    with urllib.request.urlopen(base + "/metrics", timeout=30) as response:
        text = response.read().decode()
    counts = {}
    for line in text.splitlines():
        if line.startswith("jarvis_event_loop_lag_seconds_bucket{"):
            bound = line.split('le="', 1)[1].split('"', 1)[0]
            counts[float("inf") if bound == "+Inf" else float(bound)] = float(
                line.rsplit(" ", 1)[1]
            )
    return counts


def lag_p99_ms(before: list[dict], after: list[dict]) -> float | None:
    """The p99 of the ticks observed between two scrapes of every worker, as the upper bound
    of its bucket (ms)."""
    counts: dict[float, float] = {}
    for old, new in zip(before, after, strict=True):
        for bound, count in new.items():
            counts[bound] = counts.get(bound, 0.0) + count - old.get(bound, 0.0)
    total = counts.get(float("inf"), 0.0)
    if not total:
        return None
    for bound in sorted(counts):
        if counts[bound] >= 0.99 * total:
            return bound * 1000
    return None


def cpu_seconds(pid: int) -> float:
    """A process's user + system CPU time so far (/proc/<pid>/stat utime + stime)."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@dataclass
class Progress:
    in_flight: int = 0  # agent_start seen, agent_end not yet
    peak: int = 0
    last_frame: float = field(default_factory=time.monotonic)


@dataclass
class Conversation:
    base: str
    session_id: str
    token: str
    ws: object = None
    sent: float = 0.0
    started: float = 0.0
    ended: float = 0.0
    status: str = ""
    dropped: bool = False
    open_error: str = ""
    frames: int = 0
    extra: dict = field(default_factory=dict)

    async def open(self) -> None:
        from websockets.asyncio.client import connect

        host = self.base.removeprefix("http://")
        self.ws = await connect(
            f"ws://{host}/ws/sessions/{self.session_id}/",
            origin=self.base,
            additional_headers={"Authorization": f"Token {self.token}"},
            open_timeout=60,
            ping_interval=None,
            max_size=None,
        )
        while json.loads(await asyncio.wait_for(self.ws.recv(), 60))["type"] != "session":
            pass

    async def prompt(self, text: str) -> None:
        self.sent = time.monotonic()
        await self.ws.send(json.dumps({"type": "prompt", "text": text}))

    async def abort(self) -> float:
        sent = time.monotonic()
        await self.ws.send(json.dumps({"type": "abort"}))
        return sent

    async def until_end(self, deadline: float, progress: Progress) -> None:
        from websockets.exceptions import ConnectionClosed

        try:
            while True:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return
                raw = await asyncio.wait_for(self.ws.recv(), remaining)
                self.frames += 1
                progress.last_frame = time.monotonic()
                # Only the few frames that matter are decoded: the client shares the CPUs.
                if '"agent_' not in raw and '"error"' not in raw:
                    continue
                frame = json.loads(raw)
                if frame["type"] == "agent_start":
                    self.started = time.monotonic()
                    progress.in_flight += 1
                    progress.peak = max(progress.peak, progress.in_flight)
                elif frame["type"] == "agent_end":
                    self.ended = time.monotonic()
                    self.status = frame.get("status", "")
                    progress.in_flight -= 1
                    return
                elif frame["type"] == "error":
                    self.ended = time.monotonic()
                    self.status = f"error:{frame.get('code')}"
                    return
        except TimeoutError:
            return
        except ConnectionClosed:
            self.dropped = True

    async def close(self) -> None:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self.ws.close(), 10)


async def open_all(conversations: list[Conversation]) -> None:
    """Open every socket, a few at a time; one that cannot open is a drop, not a crash."""
    gate = asyncio.Semaphore(CONNECTS_AT_ONCE)

    async def open_one(conversation):
        async with gate:
            try:
                await conversation.open()
            except Exception as error:  # noqa: BLE001 - reported in the table
                conversation.open_error = f"{type(error).__name__}: {error}"
                conversation.dropped = True

    await asyncio.gather(*(open_one(c) for c in conversations))
    failed = [c for c in conversations if c.open_error]
    if failed:
        log(f"  {len(failed)} sockets did not open, e.g. {failed[0].open_error}")


def machine_ticks() -> tuple[int, int]:
    """(busy, all) clock ticks of every CPU of the machine since boot (/proc/stat)."""
    with open("/proc/stat") as stat:
        ticks = [int(value) for value in stat.readline().split()[1:]]
    return sum(ticks) - ticks[3] - ticks[4], sum(ticks)  # idle and iowait are not busy


def busy_share(samples: list[tuple[float, int, int]], start: float, end: float) -> float | None:
    """How busy the machine's CPUs were between two moments, from the samples around them."""
    before = [s for s in samples if s[0] <= start]
    after = [s for s in samples if s[0] >= end]
    if not before or not after:
        return None
    (_, busy0, all0), (_, busy1, all1) = before[-1], after[0]
    return (busy1 - busy0) / max(all1 - all0, 1)


async def sample_peak_rss(
    pids: list[int],
    peaks: dict[int, int],
    stop_event: asyncio.Event,
    machine: list[tuple[float, int, int]],
):
    """Each process's peak memory, and the machine's CPU ticks, every 50 ms."""
    while not stop_event.is_set():
        for pid in pids:
            with contextlib.suppress(OSError):
                peaks[pid] = max(peaks.get(pid, 0), memory_kb(pid))
        machine.append((time.monotonic(), *machine_ticks()))
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop_event.wait(), 0.05)


def session_patch(base: str, session_id: str, token: str, change: dict) -> None:
    """A session's settings changed as the page changes them (docs/web.md): `{"model": …}`
    is what the model picker sends."""
    request = urllib.request.Request(
        f"{base}/api/sessions/{session_id}/",
        method="PATCH",
        data=json.dumps(change).encode(),
        headers={"Authorization": f"Token {token}", "Content-Type": "application/json"},
    )
    urllib.request.urlopen(request, timeout=60).close()


async def sessions_patch(conversations: list[Conversation], change: dict) -> None:
    gate = asyncio.Semaphore(CONNECTS_AT_ONCE)

    async def one(conversation: Conversation) -> None:
        async with gate:
            await asyncio.to_thread(
                session_patch,
                conversation.base,
                conversation.session_id,
                conversation.token,
                change,
            )

    await asyncio.gather(*(one(c) for c in conversations if not c.open_error))


async def seen_starting(conversations: list[Conversation], deadline: float) -> bool:
    """Wait until each conversation's socket has seen its turn start (or the turn has ended,
    or the socket never opened); False if `deadline` came first."""
    while not all(c.started or c.ended or c.open_error for c in conversations):
        if time.monotonic() >= deadline:
            return False
        await asyncio.sleep(0.005)
    return True


async def stop_once_started(conversation: Conversation, deadline: float) -> float | None:
    """Stop the conversation's turn once its socket has seen it start, as a person presses
    Stop on a turn the tab shows running (a Stop finds a turn by its lease, which a turn the
    other worker has not started yet does not hold). When the Stop was sent; None if the
    turn ended or never started first."""
    if not await seen_starting([conversation], deadline) or conversation.ended:
        return None
    return await conversation.abort()


def short_turns(turns: list[tuple[float | None, float | None, str | None]]) -> dict:
    """The short turns' median (ms) once every one completed, and how the first that did not
    ended ("lost" when it never did)."""
    for *_, status in turns:
        if status != "completed":
            return {"short_ms": None, "short_status": status or "lost"}
    return {
        "short_ms": statistics.median((ended - sent) * 1000 for sent, ended, _ in turns),
        "short_status": "completed",
    }


async def run_load(
    workers: list[Worker], tokens: list[str], args, session_model: str | None = None
) -> dict:
    """N load sessions spread over the workers, plus SHORT_TURNS short-turn sessions on the
    first; with `session_model`, each of them first picks that model as its own."""
    run = uuid.uuid4().hex[:6]  # fresh session ids (and channel groups) for every run
    count = args.sessions
    load = [
        Conversation(workers[index % len(workers)].base, f"load-{run}-{index:05d}", tokens[index])
        for index in range(count)
    ]
    shorts = [
        Conversation(workers[0].base, f"short-{run}-{number}", tokens[count + number])
        for number in range(SHORT_TURNS)
    ]
    # With two workers, every other pair of sessions is read by a socket on the other worker
    # than its turn: the prompting socket sends and closes, so half the sockets that watch a
    # turn are on the worker that does not run it (docs/design.md §17).
    watchers = {
        index: Conversation(
            workers[(index + 1) % len(workers)].base, load[index].session_id, tokens[index]
        )
        for index in range(1, count)
        if len(workers) > 1 and index % 4 >= 2
    }
    # With two workers the second session's turn (run by the second worker) is stopped from
    # a socket of its own on the first: a Stop crosses workers over Redis (§17), and the
    # person who pressed it sees the turn end on that socket.
    remote_stop = (
        Conversation(workers[0].base, load[1].session_id, tokens[1])
        if len(workers) > 1 and count > 2
        else None
    )
    stoppers = [remote_stop] if remote_stop is not None else []
    log(f"  opening {count + SHORT_TURNS + len(watchers) + len(stoppers)} sockets")
    await open_all([*load, *shorts, *watchers.values(), *stoppers])
    # Both setups send the same requests before the storm, so that the rows differ in the
    # model only: B picks its model, A sends the thinking level each session has (a PATCH
    # that changes nothing). Without A's, the 205 requests B alone made left their garbage
    # to the collector's first passes in B's storm: B's CPU per turn came out 1.05-1.13x A's
    # with two workers (docs/performance-log.md).
    if session_model is not None:
        log(f"  every session picks {session_model}")
        await sessions_patch([*load, *shorts], {"model": session_model})
    else:
        log("  every session sends the thinking level it has")
        await sessions_patch([*load, *shorts], {"thinking": "off"})
    pids = [worker.pid for worker in workers]
    baseline = {pid: memory_kb(pid) for pid in pids}
    peaks: dict[int, int] = dict(baseline)
    stop_sampling = asyncio.Event()
    machine: list[tuple[float, int, int]] = []
    sampler = asyncio.create_task(sample_peak_rss(pids, peaks, stop_sampling, machine))
    progress = Progress()

    log(f"  {count} prompts at once")
    machine.append((time.monotonic(), *machine_ticks()))  # the storm's first moment
    lag_before = [loop_lag_buckets(worker.base) for worker in workers]
    cpu_before = {pid: cpu_seconds(pid) for pid in pids}
    deadline = time.monotonic() + args.timeout
    readers = []
    closing = []
    for index, conversation in enumerate(load):
        if conversation.open_error:
            continue
        await conversation.prompt(LONG_PROMPT)
        watcher = watchers.get(index)
        if watcher is not None and not watcher.open_error:
            watcher.sent = conversation.sent
            readers.append(asyncio.create_task(watcher.until_end(deadline, progress)))
            # The turn runs on; closing in the background keeps the prompts going out at once.
            closing.append(asyncio.create_task(conversation.close()))
            load[index] = watcher
            continue
        readers.append(asyncio.create_task(conversation.until_end(deadline, progress)))
    first_sent = load[0].sent
    if remote_stop is not None and not remote_stop.open_error:
        readers.append(asyncio.create_task(remote_stop.until_end(deadline, Progress())))
    # Half a second into the storm: an abort, and a Stop from the other worker, show whether
    # the workers still stop a turn at once.
    remote_sent = remote_stopping = None
    await asyncio.sleep(max(0.0, first_sent + SHORT_AFTER_SEC - time.monotonic()))
    abort_sent = None if load[0].open_error else await load[0].abort()
    if remote_stop is not None and not remote_stop.open_error and not load[1].open_error:
        remote_stopping = asyncio.create_task(stop_once_started(remote_stop, deadline))
    # Once every answer streams: short turns show whether a worker still answers at once.
    await seen_starting(load, time.monotonic() + STREAMING_WAIT_SEC)
    shorts_from = time.monotonic()
    for number, short in enumerate(shorts):
        at = shorts_from + number * SHORT_SPACING_SEC
        await asyncio.sleep(max(0.0, at - time.monotonic()))
        if not short.open_error:
            await short.prompt(SHORT_PROMPT)
            readers.append(asyncio.create_task(short.until_end(deadline, Progress())))
    if remote_stopping is not None:
        remote_sent = await remote_stopping
    await until_done_or_quiet(readers, progress)
    await asyncio.gather(*closing)
    cpu_used = sum(cpu_seconds(pid) - cpu_before[pid] for pid in pids)
    lag_after = [loop_lag_buckets(worker.base) for worker in workers]
    stop_sampling.set()
    await sampler
    log("  closing the sockets")
    await asyncio.gather(*(c.close() for c in [*load, *shorts, *stoppers]))
    across = [c for index, c in watchers.items() if load[index] is c and c.status == "completed"]

    timed = load[1 + len(stoppers) :]  # the stopped turns are not the load's
    measured = [c for c in timed if c.status == "completed"]
    starts = [c.started for c in load if c.started]
    overheads = [(c.ended - c.sent - args.latency) * 1000 for c in measured]
    ends = [c.ended for c in load if c.ended]
    growth_kb = sum(peaks[pid] - baseline[pid] for pid in pids)
    return {
        "sessions": count,
        "completed": len(measured),
        "other_end": sum(1 for c in timed if c.ended and c.status != "completed"),
        "lost": sum(1 for c in load if not c.ended and not c.open_error),
        "open_failures": sum(1 for c in [*load, *shorts, *stoppers] if c.open_error),
        "drops": sum(1 for c in [*load, *shorts, *stoppers] if c.dropped),
        "wall_s": (max(ends) - first_sent) if ends else None,
        "p50_ms": percentile(overheads, 50),
        "p99_ms": percentile(overheads, 99),
        **short_turns([(c.sent, c.ended, c.status) for c in shorts]),
        "abort_ms": (load[0].ended - abort_sent) * 1000 if abort_sent and load[0].ended else None,
        "abort_status": load[0].status or "lost",
        "remote_abort_ms": (remote_stop.ended - remote_sent) * 1000
        if remote_sent and remote_stop.ended
        else None,
        "remote_abort_status": (remote_stop.status or "lost") if remote_stop else None,
        "rss_per_turn_kb": growth_kb / count,
        "cpu_ms_per_turn": cpu_used * 1000 / count,
        "lag_p99_ms": lag_p99_ms(lag_before, lag_after),
        # Frames a watching socket received per turn: the deltas' coalescing shows here.
        "frames_per_turn": statistics.mean(c.frames for c in measured) if measured else None,
        "across_p99_ms": percentile([(c.ended - c.sent - args.latency) * 1000 for c in across], 99),
        "peak_running": progress.peak,
        # A turn counts as running from its agent_start to its agent_end, so the peak falls
        # short of the sessions when the stopped turn ends before the last one starts.
        "last_start_s": (max(starts) - first_sent) if starts else None,
        "stopped_end_s": min(
            (c.ended - first_sent for c in [load[0], *stoppers] if c.ended), default=None
        ),
        "busy_until_last_start": busy_share(machine, first_sent, max(starts)) if starts else None,
        "statuses": sorted({c.status for c in timed if c.status and c.status != "completed"}),
    }


class StormConversation(Conversation):
    """A client that reconnects once mid-answer, to the other worker when there are two,
    and keeps the answer as it sees it: the running text of its snapshot, then the deltas."""

    async def storm(self, other_base: str, reconnect_at: float, deadline: float) -> None:
        from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidMessage

        text, last_event, last_seq = "", 0, 0
        self.extra.update(differs=False, gaps=0, reconnected=False)
        try:
            while True:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return
                frame = json.loads(await asyncio.wait_for(self.ws.recv(), remaining))
                self.frames += 1
                event_seq = frame.get("event_seq")
                if event_seq:
                    if last_event and event_seq != last_event + 1:
                        self.extra["gaps"] += 1
                    last_event = event_seq
                kind = frame["type"]
                if kind == "delta":
                    text += frame["text"]
                    due = time.monotonic() >= self.sent + reconnect_at
                    if due and not self.extra["reconnected"]:
                        text, last_event, last_seq = await self._reconnect(
                            other_base, text, last_seq
                        )
                        if self.ended:
                            return
                elif kind == "entry":
                    entry = frame["entry"]
                    last_seq = max(last_seq, entry["seq"])
                    if entry["role"] == "assistant":
                        self.extra["differs"] |= text != entry["content"]
                        text = ""
                elif kind in ("agent_end", "error"):
                    self.ended = time.monotonic()
                    self.status = frame.get("status") or f"error:{frame.get('code')}"
                    return
        except TimeoutError:
            return
        except (ConnectionClosed, OSError, InvalidHandshake, InvalidMessage):
            self.dropped = True

    async def _reconnect(self, other_base: str, text: str, last_seq: int):
        """Close, open again (on `other_base`), and take up the answer from the snapshot."""
        self.extra["reconnected"] = True
        await self.ws.close()
        self.base = other_base
        from websockets.asyncio.client import connect
        from websockets.exceptions import InvalidHandshake, InvalidMessage

        host = self.base.removeprefix("http://")
        # As the page does, a refused handshake (a burst of 200 at once) is tried again.
        for attempt in range(RECONNECT_ATTEMPTS):
            try:
                self.ws = await connect(
                    f"ws://{host}/ws/sessions/{self.session_id}/?after_seq={last_seq}",
                    origin=self.base,
                    additional_headers={"Authorization": f"Token {self.token}"},
                    open_timeout=60,
                    ping_interval=None,
                    max_size=None,
                )
                break
            except (OSError, InvalidHandshake, InvalidMessage):
                self.extra["retries"] = attempt + 1
                if attempt + 1 == RECONNECT_ATTEMPTS:
                    raise
                await asyncio.sleep(0.5 * 2**attempt)
        snapshot = json.loads(await asyncio.wait_for(self.ws.recv(), 60))
        running = snapshot.get("running")
        for entry in snapshot["entries"]:
            last_seq = max(last_seq, entry["seq"])
            if entry["role"] == "assistant" and entry.get("turn_id"):
                # Stored while away: what the client saw must be the start of it.
                self.extra["differs"] |= not entry["content"].startswith(text)
                text = ""
            elif entry["kind"] == "turn_end":
                # The turn ended while away: its agent_end went to the closed socket.
                self.ended = time.monotonic()
                self.status = entry["data"]["status"]
        if running is None:
            return text, 0, last_seq
        self.extra["differs"] |= not running["text"].startswith(text)
        return running["text"], running["event_seq"], last_seq


async def run_storm(workers: list[Worker], tokens: list[str], args) -> dict:
    """N turns at once; every socket reconnects once mid-answer (to the other worker when
    there are two) and compares the answer as it saw it with the stored one."""
    run = uuid.uuid4().hex[:6]
    count = args.sessions
    load = [
        StormConversation(
            workers[index % len(workers)].base, f"storm-{run}-{index:05d}", tokens[index]
        )
        for index in range(count)
    ]
    log(f"  opening {count} sockets")
    await open_all(load)
    pids = [worker.pid for worker in workers]
    cpu_before = {pid: cpu_seconds(pid) for pid in pids}
    deadline = time.monotonic() + args.timeout
    chooser = random.Random(7)
    tasks = []
    for index, conversation in enumerate(load):
        if conversation.open_error:
            continue
        await conversation.prompt(LONG_PROMPT)
        other = workers[(index + 1) % len(workers)].base
        # At the first delta after a moment in the first half of the model's time.
        reconnect_at = chooser.uniform(0.1, 0.5) * args.latency
        tasks.append(asyncio.create_task(conversation.storm(other, reconnect_at, deadline)))
    await asyncio.gather(*tasks)
    cpu_used = sum(cpu_seconds(pid) - cpu_before[pid] for pid in pids)
    await asyncio.gather(*(c.close() for c in load))
    return {
        "sessions": count,
        "completed": sum(1 for c in load if c.status == "completed"),
        "reconnected": sum(1 for c in load if c.extra.get("reconnected")),
        "differs": sum(1 for c in load if c.extra.get("differs")),
        "gaps": sum(c.extra.get("gaps", 0) for c in load),
        "lost": sum(1 for c in load if not c.ended and not c.open_error),
        "drops": sum(1 for c in load if c.dropped),
        "retried": sum(1 for c in load if c.extra.get("retries")),
        "cpu_ms_per_turn": cpu_used * 1000 / count,
    }


async def until_done_or_quiet(readers: list[asyncio.Task], progress: Progress) -> None:
    """Wait for every reader; once no socket got a frame for QUIET_SEC, the rest are lost."""
    pending = set(readers)
    while pending:
        _, pending = await asyncio.wait(pending, timeout=1)
        if pending and time.monotonic() - progress.last_frame > QUIET_SEC:
            log(f"  {len(pending)} sockets silent for {QUIET_SEC} s: their turns count as lost")
            for reader in pending:
                reader.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
            return


def percentile(values: list[float], pct: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(pct / 100 * (len(ordered) - 1)))]


# --- the peer --------------------------------------------------------------------------


def run_peer(config: str, model_url: str, scratch: Path, args) -> dict | None:
    """bench/peer_load.py in the peer's virtualenv: one process per worker of ours."""
    python = Path(args.peer_python)
    if not python.exists():
        log(f"  peer skipped: {python} is missing (make bench-turns installs it)")
        return None
    if config == "one":
        stores = [f"sqlite:{scratch / 'peer.sqlite3'}"]
    else:
        url = postgres_create()
        if url is None:
            return None
        stores = [url] * WORKERS[config]
    processes = []
    shares = split(args.sessions, len(stores))
    try:
        for index, (store, (offset, share)) in enumerate(zip(stores, shares, strict=True)):
            processes.append(
                subprocess.Popen(
                    [
                        str(python),
                        str(BENCH / "peer_load.py"),
                        f"--store={store}",
                        f"--base-url={model_url}",
                        f"--model={MODEL}",
                        f"--sessions={share}",
                        f"--offset={offset}",
                        f"--latency={args.latency}",
                        f"--timeout={args.timeout}",
                        f"--short-prompt={SHORT_PROMPT}",
                        f"--short-after={SHORT_AFTER_SEC}",
                        f"--short-turns={SHORT_TURNS}",
                        f"--short-spacing={SHORT_SPACING_SEC}",
                        f"--streaming-wait={STREAMING_WAIT_SEC}",
                        f"--long-prompt={LONG_PROMPT}",
                        *(["--short-and-abort"] if index == 0 else []),
                    ],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    text=True,
                )
            )
            # One at a time: each creates the tables (if missing) in its untimed warm-up.
            if processes[-1].stdout.readline().strip() != "ready":
                raise RuntimeError("a peer process did not get ready")
        for process in processes:  # all at once, as our prompts
            process.stdin.write("go\n")
            process.stdin.flush()
        results = []
        for process in processes:
            out, _ = process.communicate(timeout=args.timeout + 120)
            results.append(json.loads(out.strip().splitlines()[-1]))
    finally:
        for process in processes:
            stop(process)
        if config != "one":
            postgres_drop()
    return merge_peer(results, args)


def split(total: int, parts: int) -> list[tuple[int, int]]:
    size, rest = divmod(total, parts)
    shares, offset = [], 0
    for index in range(parts):
        share = size + (1 if index < rest else 0)
        shares.append((offset, share))
        offset += share
    return shares


def merge_peer(results: list[dict], args) -> dict:
    overheads = [value for result in results for value in result["overheads_ms"]]
    first = min(result["first_started"] for result in results)
    last = max((result["last_ended"] for result in results if result["last_ended"]), default=None)
    head = results[0]
    return {
        "sessions": sum(result["sessions"] for result in results),
        "completed": sum(result["completed"] for result in results),
        "other_end": sum(result["other_end"] for result in results),
        "lost": sum(result["lost"] for result in results),
        "drops": 0,
        "wall_s": (last - first) if last else None,
        "p50_ms": percentile(overheads, 50),
        "p99_ms": percentile(overheads, 99),
        "short_ms": head["short_ms"],
        "short_status": head["short_status"],
        "abort_ms": head["abort_ms"],
        "abort_status": head["abort_status"],
        "rss_per_turn_kb": sum(result["rss_growth_kb"] for result in results) / args.sessions,
        "cpu_ms_per_turn": sum(result["cpu_s"] for result in results) * 1000 / args.sessions,
        "lag_p99_ms": max(
            (result["lag_p99_ms"] for result in results if result.get("lag_p99_ms") is not None),
            default=None,
        ),
        "across_p99_ms": None,
        "peak_running": sum(result["peak_running"] for result in results),
        "statuses": sorted({status for result in results for status in result["statuses"]}),
    }


# --- configurations ----------------------------------------------------------------------


def run_config(config: str, scratch: Path, args) -> list[dict]:
    workers = WORKERS[config]
    on_sqlite = config in ("one", "storm-one")
    extra = {}
    if not on_sqlite:
        if not redis_reachable():
            return []
        extra["REDIS_URL"] = REDIS_URL
    # The storms run once; `one` and `two` twice per model setup, each run on a fresh database
    # and fresh workers, so that no run finds what another left, in the order A B B A: the
    # later of two runs came out slower (the same model in both setups gave a short turn up to
    # 2x slower in the second), and this order puts each setup first once and last once.
    runs = [("jarvis", None)]
    if not config.startswith("storm"):
        picked = ("jarvis, session model", f"openai:{SESSION_MODEL}")
        runs += [picked, picked, ("jarvis", None)]
    rows = []
    used_postgres = False
    try:
        with fake_model(args.latency, args.chunks) as model:
            model_url = model.url
            for number, (system, session_model) in enumerate(runs):
                if on_sqlite:
                    database_url = f"sqlite:///{scratch / f'app-{number}.sqlite3'}"
                else:
                    database_url = postgres_create()
                    if database_url is None:
                        return rows
                    used_postgres = True
                env = app_env(
                    scratch,
                    database_url,
                    JARVIS_MODEL=f"openai:{MODEL}",
                    # The model the sessions of the second run pick, offered as a deployment
                    # offers its models: every worker prepares it at start (docs/design.md §26).
                    JARVIS_MODELS=f"openai:{SESSION_MODEL}",
                    OPENAI_BASE_URL=model_url,
                    # Turns against turns: the peer does not name its conversations, and a
                    # title written by the model is one more 2 s stream per new conversation
                    # (docs/performance.md). Every session is new: titles keep the first words.
                    TITLE_MODEL="offline",
                    **extra,
                )
                if session_model is not None:
                    log(f"  again, every session on {session_model}")
                log(f"  migrating and creating {args.sessions + SHORT_TURNS} users")
                tokens = prepare(env, args.sessions + SHORT_TURNS)
                with contextlib.ExitStack() as stack:
                    running = [
                        stack.enter_context(daphne(env, scratch / f"daphne-{index}.log"))
                        for index in range(workers)
                    ]
                    if config.startswith("storm"):
                        return [
                            {
                                "config": config,
                                "system": system,
                                **asyncio.run(run_storm(running, tokens, args)),
                            }
                        ]
                    result = asyncio.run(run_load(running, tokens, args, session_model))
                if (
                    result["open_failures"]
                    or result["lost"]
                    or "lost"
                    in (
                        result["short_status"],
                        result["abort_status"],
                        result.get("remote_abort_status"),
                    )
                ):
                    for index in range(workers):
                        log_tail(scratch / f"daphne-{index}.log")
                rows.append(
                    {"config": config, "system": system, "fake": model.lateness(), **result}
                )
            if used_postgres:
                postgres_drop()
                used_postgres = False
            log("  the peer, same workload")
            peer = run_peer(config, model_url, scratch, args)
            if peer is not None:
                rows.append(
                    {"config": config, "system": "openai-agents", "fake": model.lateness(), **peer}
                )
    finally:
        if used_postgres:
            postgres_drop()
    return rows


async def single_turns(base: str, token: str) -> list[float]:
    times = []
    for _session in range(SINGLE_TURNS // SINGLE_TURNS_PER_SESSION):
        conversation = Conversation(base, f"single-{uuid.uuid4().hex[:8]}", token)
        await conversation.open()
        for _ in range(SINGLE_TURNS_PER_SESSION):
            await conversation.prompt(SHORT_PROMPT)
            await conversation.until_end(time.monotonic() + 30, Progress())
            if conversation.status != "completed":
                raise RuntimeError(f"a single turn ended {conversation.status or 'lost'}")
            times.append((conversation.ended - conversation.sent) * 1000)
            conversation.status = ""
        await conversation.close()
    return times[SINGLE_WARMUP:]


def run_single(scratch: Path, args) -> dict:
    env = app_env(scratch, f"sqlite:///{scratch / 'single.sqlite3'}", JARVIS_MODEL="offline")
    log("  migrating")
    token = prepare(env, 1)[0]
    with daphne(env, scratch / "daphne-single.log", profile=args.profile) as worker:
        times = asyncio.run(single_turns(worker.base, token))
    if args.profile:
        log(f"  profile written to {args.profile}")
    return {
        "turns": len(times),
        "p50_ms": statistics.median(times),
        "p90_ms": percentile(times, 90),
        "min_ms": min(times),
    }


# --- the table -----------------------------------------------------------------------------


def fmt(value, unit: str = "") -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.0f}{unit}" if abs(value) >= 10 else f"{value:.2f}{unit}"
    return f"{value}{unit}"


def print_table(rows: list[dict], args) -> None:
    header = (
        "config",
        "system",
        "sessions",
        "completed",
        "lost",
        "drops",
        "wall s",
        "overhead p50 ms",
        "overhead p99 ms",
        f"short turn once all stream, median of {SHORT_TURNS}, ms",
        "abort ms (status)",
        "Stop from the other worker, ms",
        "RSS/turn KB",
        "CPU ms/turn",
        "loop lag p99 ms",
        "other-worker p99 ms",
        "peak running",
    )
    table = [header]
    for row in rows:
        table.append(
            (
                row["config"],
                row["system"],
                str(row["sessions"]),
                str(row["completed"])
                + (f" (+{row['other_end']} other)" if row["other_end"] else ""),
                str(row["lost"]),
                str(row["drops"]),
                fmt(row["wall_s"]),
                fmt(row["p50_ms"]),
                fmt(row["p99_ms"]),
                fmt(row["short_ms"])
                + ("" if row["short_status"] == "completed" else f" ({row['short_status']})"),
                f"{fmt(row['abort_ms'])} ({row['abort_status']})",
                f"{fmt(row.get('remote_abort_ms'))} ({row['remote_abort_status']})"
                if row.get("remote_abort_status")
                else "-",
                fmt(row["rss_per_turn_kb"]),
                fmt(row["cpu_ms_per_turn"]),
                "<=" + fmt(row["lag_p99_ms"]) if row.get("lag_p99_ms") is not None else "-",
                fmt(row["across_p99_ms"]),
                str(row["peak_running"]),
            )
        )
    widths = [max(len(line[i]) for line in table) for i in range(len(header))]
    for index, line in enumerate(table):
        print(" | ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)))
        if index == 0:
            print("-|-".join("-" * width for width in widths))
    for config in dict.fromkeys(row["config"] for row in rows):
        ours = next((r for r in rows if r["config"] == config and r["system"] == "jarvis"), None)
        peer = next(
            (r for r in rows if r["config"] == config and r["system"] == "openai-agents"), None
        )
        if ours and peer and ours["p99_ms"] is not None and peer["p99_ms"]:
            print(
                f"{config}: overhead ratio jarvis / peer: p50 "
                f"{ratio(ours['p50_ms'], peer['p50_ms'])}, p99 {ratio(ours['p99_ms'], peer['p99_ms'])}"
            )
        picked = next(
            (r for r in rows if r["config"] == config and r["system"] == "jarvis, session model"),
            None,
        )
        if ours and picked:
            print(session_model_ratios(config, rows))
        for row in (ours, picked, peer):
            if row and row.get("open_failures"):
                print(f"{config} {row['system']}: {row['open_failures']} sockets did not open")
            if row and row["statuses"]:
                print(f"{config} {row['system']}: other endings: {', '.join(row['statuses'])}")
            if row and row.get("stopped_end_s") and row["peak_running"] < row["sessions"]:
                print(
                    f"{config} {row['system']}: peak running {row['peak_running']} of "
                    f"{row['sessions']}: the last turn started {row['last_start_s']:.2f} s after "
                    f"the first prompt, a stopped one had ended at {row['stopped_end_s']:.2f} s"
                    + (
                        f"; the machine's CPUs were {row['busy_until_last_start']:.0%} busy until then"
                        if row.get("busy_until_last_start") is not None
                        else ""
                    )
                )
            if row and row.get("fake", {}).get("p99_ms") is not None:
                print(
                    f"{config} {row['system']}: the fake model's own lateness over "
                    f"{row['fake']['streams']} streams: p99 {row['fake']['p99_ms']:.0f} ms"
                )
    print(
        f"model: {args.latency} s, {args.chunks} chunks per turn. Targets: all complete, 0 lost, "
        f"0 drops, wall {TARGETS['wall']}, p99 {TARGETS['p99']}, short {TARGETS['short']}, "
        f"abort {TARGETS['abort']}, RSS/turn {TARGETS['rss']}; p99 <= the peer's."
    )


def print_storm(row: dict) -> None:
    print(
        f"reload storm ({row['config']}): {row['sessions']} turns, {row['completed']} completed, "
        f"{row['reconnected']} sockets reconnected mid-answer; texts that differ from the "
        f"stored answer {row['differs']}, lost events {row['gaps']}, lost turns {row['lost']}, "
        f"drops {row['drops']} ({row['retried']} reconnects retried); CPU {fmt(row['cpu_ms_per_turn'])} ms/turn (targets 0, 0, 0, 0)"
    )


def session_model_ratios(config: str, rows: list[dict]) -> str:
    """The target's line: each setup's mean over its runs (A B B A), session model over
    JARVIS_MODEL, on CPU per turn and the short turn."""

    def mean_of(system: str, key: str) -> float | None:
        values = [r[key] for r in rows if r["config"] == config and r["system"] == system]
        return statistics.mean(values) if values and None not in values else None

    cells = []
    for key, name in (("cpu_ms_per_turn", "CPU per turn"), ("short_ms", "short turn")):
        ours, picked = mean_of("jarvis", key), mean_of("jarvis, session model", key)
        cells.append(f"{name} {ratio(picked, ours) if ours and picked else '-'}")
    return (
        f"{config}: session model / JARVIS_MODEL, means of the runs in the order A B B A: "
        + ", ".join(cells)
        + " (target <= 1.2x each)"
    )


def ratio(ours: float, theirs: float) -> str:
    return f"{ours / theirs:.2f}x" if theirs > 0 else "-"


def print_single(single: dict) -> None:
    print(
        f"single offline turn (one client, SQLite, over WebSocket), {single['turns']} turns: "
        f"p50 {single['p50_ms']:.1f} ms, p90 {single['p90_ms']:.1f} ms, "
        f"min {single['min_ms']:.1f} ms (target p50 {TARGETS['single']})"
    )


def parent(args) -> int:
    started = time.monotonic()
    configs = {"both": ["single", "one", "two", "storm-one", "storm-two"]}.get(
        args.config, [args.config]
    )
    rows: list[dict] = []
    single = None
    with tempfile.TemporaryDirectory(prefix="jarvis-bench-turns-") as scratch_root:
        for config in configs:
            scratch = Path(scratch_root) / config
            scratch.mkdir()
            log(f"== {config}")
            if config == "single":
                single = run_single(scratch, args)
                continue
            config_args = argparse.Namespace(**vars(args))
            if config_args.sessions is None:
                config_args.sessions = DEFAULT_SESSIONS[config]
            done = run_config(config, scratch, config_args)
            log(f"  {config}: {json.dumps(done)}")
            rows.extend(done)
    print()
    if single:
        print_single(single)
    storms = [row for row in rows if row["config"].startswith("storm")]
    rows = [row for row in rows if not row["config"].startswith("storm")]
    if rows:
        print_table(rows, args)
    for row in storms:
        print_storm(row)
    print(f"total time: {time.monotonic() - started:.0f} s")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--config",
        choices=("one", "two", "storm-one", "storm-two", "single", "both"),
        default="both",
    )
    parser.add_argument("--sessions", type=int, help="default: 200 for one, 400 for two")
    parser.add_argument("--latency", type=float, default=2.0, help="model seconds per turn")
    parser.add_argument("--chunks", type=int, default=50, help="streamed pieces per answer")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per run, at most")
    parser.add_argument("--peer-python", default=str(PEER_PYTHON))
    parser.add_argument("--profile", help="single: write Daphne's cProfile stats here")
    parser.add_argument("--fake-server", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--prepare", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--profiled-daphne", help=argparse.SUPPRESS)
    args, rest = parser.parse_known_args()
    if args.fake_server:
        return fake_server_main(args.latency, args.chunks)
    if args.prepare:
        return prepare_main(args.prepare)
    if args.profiled_daphne:
        return profiled_daphne_main(args.profiled_daphne, [a for a in rest if a != "--"])
    if rest:
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    if args.sessions is not None and args.sessions < 1:
        parser.error("--sessions must be at least 1")
    if args.latency <= 0 or args.chunks < 1 or args.timeout <= 0:
        parser.error("--latency, --chunks and --timeout must be positive")
    return parent(args)


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    sys.exit(main())
