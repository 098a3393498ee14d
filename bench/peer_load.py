"""The peer of `make bench-turns`: openai-agents' async `Runner` with its own session store.

bench/turn_load.py starts this script with the peer's virtualenv (bench/.venv-peer), one
process per worker of ours, against the same fake model server. It builds one agent and one
session per conversation (`SQLiteSession` on a file, or `SQLAlchemySession` on PostgreSQL
through asyncpg), prints "ready", waits for "go" on stdin, then starts every run at once with
`Runner.run_streamed` and reads each stream to its end. The first process also runs a short
turn and cancels its first run half a second into the storm, as the WebSocket load does.
It prints one JSON line: overheads (run time minus the model's latency), timings, and the
growth of its own RSS.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import statistics
import sys
import time


def cpu_seconds() -> float:
    """This process's user + system CPU time, from /proc/self/stat as for our workers."""
    with open("/proc/self/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def memory_kb() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


async def sample_peak(peak: list[int], stop: asyncio.Event) -> None:
    while not stop.is_set():
        peak[0] = max(peak[0], memory_kb())
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), 0.05)


# The buckets of our jarvis_event_loop_lag_seconds: the p99 is reported as a bucket's bound.
LAG_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)
LAG_TICK_SEC = 0.05


async def sample_lag(lags: list[float], stop: asyncio.Event) -> None:
    """How late the event loop runs a tick every LAG_TICK_SEC, as our workers measure it."""
    loop = asyncio.get_running_loop()
    while not stop.is_set():
        due = loop.time() + LAG_TICK_SEC
        await asyncio.sleep(LAG_TICK_SEC)
        lags.append(max(0.0, loop.time() - due))


def lag_p99_ms(lags: list[float]) -> float | None:
    if not lags:
        return None
    worst = sorted(lags)[min(len(lags) - 1, int(len(lags) * 0.99))]
    return next((bound * 1000 for bound in LAG_BUCKETS if worst <= bound), float("inf"))


def short_turns(shorts: list[dict], sent: bool) -> dict:
    """The short turns' median (ms) once every one completed, as the app's row has it."""
    if not sent:
        return {"short_ms": None, "short_status": "-"}
    for short in shorts:
        if short.get("status") != "completed":
            return {"short_ms": None, "short_status": short.get("status") or "lost"}
    return {
        "short_ms": statistics.median((s["ended"] - s["started"]) * 1000 for s in shorts),
        "short_status": "completed",
    }


async def main(args) -> dict:
    from agents import (
        Agent,
        OpenAIChatCompletionsModel,
        Runner,
        SQLiteSession,
        set_tracing_disabled,
    )
    from openai import AsyncOpenAI

    set_tracing_disabled(True)
    client = AsyncOpenAI(base_url=args.base_url, api_key="bench")
    agent = Agent(
        name="bench",
        instructions="You are a helpful assistant.",
        model=OpenAIChatCompletionsModel(model=args.model, openai_client=client),
    )
    if args.store.startswith("sqlite:"):
        path = args.store.removeprefix("sqlite:")

        def make_session(session_id):
            return SQLiteSession(session_id, path)
    else:
        from agents.extensions.memory.sqlalchemy_session import SQLAlchemySession
        from sqlalchemy.ext.asyncio import create_async_engine

        url = args.store.replace("postgres://", "postgresql+asyncpg://", 1)
        engine = create_async_engine(url)

        def make_session(session_id):
            # The warm-up run creates the tables; the rest use them, as in production.
            return SQLAlchemySession(
                session_id, engine=engine, create_tables=session_id == "warm-up"
            )

    sessions = [make_session(f"load-{args.offset + index:05d}") for index in range(args.sessions)]
    short_sessions = [
        make_session(f"short-{args.offset}-{number}") for number in range(args.short_turns)
    ]
    # One untimed run creates the tables and warms the client, as our servers are warm.
    warm = Runner.run_streamed(agent, args.short_prompt, session=make_session("warm-up"))
    async for _ in warm.stream_events():
        pass

    print("ready", flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
    cpu_before = cpu_seconds()
    baseline = memory_kb()
    peak = [baseline]
    stop = asyncio.Event()
    sampler = asyncio.create_task(sample_peak(peak, stop))
    lags: list[float] = []
    lag_sampler = asyncio.create_task(sample_lag(lags, stop))
    running = [0, 0]
    deadline = time.monotonic() + args.timeout

    async def one(session, prompt, record):
        record["started"] = time.monotonic()
        result = Runner.run_streamed(agent, prompt, session=session)
        record["result"] = result
        running[0] += 1
        running[1] = max(running[1], running[0])
        try:
            async with asyncio.timeout(max(0.0, deadline - time.monotonic())):
                async for _ in result.stream_events():
                    record.setdefault("streaming", time.monotonic())
            record["ended"] = time.monotonic()
            record["status"] = "completed" if result.final_output is not None else "cancelled"
        except TimeoutError:
            record["status"] = ""
        except Exception as error:  # noqa: BLE001 - reported as the run's ending
            record["ended"] = time.monotonic()
            record["status"] = f"error:{type(error).__name__}"
        finally:
            running[0] -= 1

    records = [{} for _ in sessions]
    first_started = time.monotonic()
    tasks = [
        asyncio.create_task(one(session, args.long_prompt, record))
        for session, record in zip(sessions, records, strict=True)
    ]
    shorts: list[dict] = [{} for _ in short_sessions]
    abort_sent = None
    if args.short_and_abort:
        # As the app's row has it: the abort at `short_after`, the short turns from the
        # moment every answer streams (turn_load.SHORT_TURNS).
        await asyncio.sleep(max(0.0, first_started + args.short_after - time.monotonic()))
        abort_sent = time.monotonic()
        records[0]["result"].cancel()
        streaming_by = time.monotonic() + args.streaming_wait
        while time.monotonic() < streaming_by and not all(
            "streaming" in r or "status" in r for r in records
        ):
            await asyncio.sleep(0.005)
        shorts_from = time.monotonic()
        for number, (session, short) in enumerate(zip(short_sessions, shorts, strict=True)):
            at = shorts_from + number * args.short_spacing
            await asyncio.sleep(max(0.0, at - time.monotonic()))
            tasks.append(asyncio.create_task(one(session, args.short_prompt, short)))
    await asyncio.gather(*tasks)
    cpu_used = cpu_seconds() - cpu_before
    stop.set()
    await sampler
    await lag_sampler

    # The cancelled run is the abort's, not part of the load's overheads.
    timed = records[1:] if args.short_and_abort else records
    measured = [r for r in timed if r.get("status") == "completed"]
    ends = [r["ended"] for r in records if r.get("ended")]
    head = records[0]
    return {
        "cpu_s": cpu_used,
        "sessions": args.sessions,
        "completed": len(measured),
        "other_end": sum(1 for r in timed if r.get("ended") and r["status"] != "completed"),
        "lost": sum(1 for r in records if not r.get("ended")),
        "overheads_ms": [(r["ended"] - r["started"] - args.latency) * 1000 for r in measured],
        "first_started": min(r["started"] for r in records),
        "last_ended": max(ends) if ends else None,
        **short_turns(shorts, args.short_and_abort),
        "abort_ms": (head["ended"] - abort_sent) * 1000
        if abort_sent and head.get("ended")
        else None,
        "abort_status": head.get("status") or "lost",
        "rss_growth_kb": peak[0] - baseline,
        "lag_p99_ms": lag_p99_ms(lags),
        "peak_running": running[1],
        "statuses": sorted(
            {r["status"] for r in timed if r.get("status") and r["status"] != "completed"}
        ),
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", required=True, help="sqlite:<path> or a postgres:// URL")
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--sessions", type=int, required=True)
    parser.add_argument("--offset", type=int, default=0)
    parser.add_argument("--latency", type=float, required=True)
    parser.add_argument("--timeout", type=float, required=True)
    parser.add_argument("--short-prompt", required=True)
    parser.add_argument("--long-prompt", required=True)
    parser.add_argument("--short-and-abort", action="store_true")
    parser.add_argument("--short-after", type=float, default=0.5)
    parser.add_argument("--streaming-wait", type=float, default=10.0)
    parser.add_argument("--short-turns", type=int, default=1)
    parser.add_argument("--short-spacing", type=float, default=0.1)
    print(json.dumps(asyncio.run(main(parser.parse_args()))), flush=True)
