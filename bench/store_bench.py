"""Session store benchmark: the project's store against the raw driver, in the same run.

`make bench` runs this script. The parent process starts one child per configuration
(SQLite, PostgreSQL, jsonl) with its own environment and scratch storage, collects each
child's measurements (one JSON line on stdout) and prints one table. Inside a child, the
store and the raw side run interleaved on the same database, so both see the same caches,
the same disk and the same background noise; every figure is a median.

What the raw side does (docs/performance.md says the same):
- append: one transaction with `UPDATE … RETURNING last_seq` and one multi-row INSERT
  (jsonl: open, append the lines, flush, fsync);
- load: SELECT in seq order, and decode the JSON columns and timestamps into Python values,
  so it returns what the store returns minus the dataclasses (jsonl: read, split, json.loads);
- branch: insert the session row + `INSERT … SELECT` (jsonl: copy the bytes, fsync, write meta,
  copy the rows in the search index);
- delete: the same DELETE statements as the store (jsonl: remove the rows from the search
  index, unlink the files);
- list: SELECT the meta columns newest first (jsonl: read and decode every meta file).

The entry table the raw side writes is the project's own, search index included (the
generated column and GIN index on PostgreSQL, the FTS5 triggers on SQLite); the raw jsonl
append writes the same rows into the same FTS5 index file. What the index itself costs is
one more row: the raw append into the indexed table against the raw append into a copy of
the table without the index. A turn in a session of 10,000 entries (with the compaction a
long conversation has) is compared with one in a session of 10, as the "raw" side: a turn
reads from the latest compaction on, so its start does not grow with the history. Search
has no raw side: its rows are the p50 of each query
over 100,000 entries (1,000 sessions of 100), against an absolute target; so are the p50 and
p99 over twelve messages of 100,000 characters each, where the snippet has to be found.

The script exits 0 even when a target is missed: it reports, it does not gate.
"""

from __future__ import annotations

import argparse
import builtins
import gc
import io
import json
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PG_SERVER_URL = os.environ.get("BENCH_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432")
PG_BENCH_DB = "jarvis_bench"
CONFIGS = ("sqlite", "postgres", "jsonl", "sandbox")
# `print(1)` runs of the sandbox (bench/sandbox_bench.py) per workspace size.
SANDBOX_RUNS = 30

TURNS = 500
LOADS = 20
COPIES = 20
LISTED_SESSIONS = 1000
LISTS = 20

SEARCH_SESSIONS = 1000
SEARCH_TURNS = 25  # per session, 4 entries each: 100 entries per session
SEARCH_RUNS = 30
SEARCH_TARGET_MS = 50
SEARCH_VOCABULARY = 5000
LARGE_MESSAGES = 12
LARGE_MESSAGE_CHARS = 100_000
LARGE_SEARCH_RUNS = 50
LARGE_SEARCH_TARGET_MS = 100
LOREM = (
    "lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod tempor incididunt "
    "ut labore et dolore magna aliqua enim ad minim veniam quis nostrud exercitation ullamco "
    "laboris nisi aliquip ex ea commodo consequat duis aute irure in reprehenderit voluptate"
).split()
UNINDEXED_ENTRY = "bench_unindexed_entry"

TARGETS = {
    "append": 1.5,
    "append flat": 1.25,
    "load": 1.5,
    "branch": 1.3,
    "delete": 1.5,
    "list": 1.5,
    "turn start": 1.5,
}
# A turn's start in a long session against one in a short one (docs/design.md §22).
LONG_SESSION_ENTRIES = 10_000
SHORT_SESSION_ENTRIES = 10
TURN_STARTS = 20


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# --- the parent: one child per configuration, one table ---------------------------------


def postgres_create() -> str | None:
    """Create an empty scratch database; None (with the reason printed) if unreachable."""
    try:
        import psycopg

        with psycopg.connect(f"{PG_SERVER_URL}/postgres", autocommit=True, connect_timeout=3) as db:
            db.execute(f"DROP DATABASE IF EXISTS {PG_BENCH_DB} WITH (FORCE)")
            db.execute(f"CREATE DATABASE {PG_BENCH_DB}")
    except Exception as error:  # noqa: BLE001 - any failure means "skip PostgreSQL"
        log(f"PostgreSQL skipped: cannot create {PG_BENCH_DB} on {PG_SERVER_URL} ({error})")
        return None
    return f"{PG_SERVER_URL}/{PG_BENCH_DB}"


def postgres_drop() -> None:
    import psycopg

    with psycopg.connect(f"{PG_SERVER_URL}/postgres", autocommit=True, connect_timeout=3) as db:
        db.execute(f"DROP DATABASE IF EXISTS {PG_BENCH_DB} WITH (FORCE)")


def run_config(config: str, scratch: Path, sandbox_runs: int = SANDBOX_RUNS) -> dict | None:
    env = dict(os.environ)
    env.pop("REDIS_URL", None)
    env["DJANGO_SETTINGS_MODULE"] = "jarvis_site.settings"
    env["SESSIONS_DIR"] = str(scratch / "sessions")
    env["BLOB_STORAGE_URL"] = f"file://{scratch / 'blobs'}"
    # Every configuration gets a database of its own; jsonl keeps only its connection rows,
    # approval requests and lock anchors there.
    env["DATABASE_URL"] = f"sqlite:///{scratch / 'bench.sqlite3'}"
    env["JARVIS_SESSION__PERSISTENCE_BACKEND"] = "jsonl" if config == "jsonl" else "db"
    if config == "postgres":
        url = postgres_create()
        if url is None:
            return None
        env["DATABASE_URL"] = url
    try:
        child = subprocess.run(
            [
                sys.executable,
                str(Path(__file__).resolve()),
                "--child",
                config,
                "--sandbox-runs",
                str(sandbox_runs),
            ],
            cwd=REPO,
            env=env,
            stdout=subprocess.PIPE,
            text=True,
            timeout=600,
            check=False,
        )
    finally:
        if config == "postgres":
            postgres_drop()
    if child.returncode != 0:
        log(f"{config}: the benchmark child failed (exit {child.returncode})")
        return None
    return json.loads(child.stdout.strip().splitlines()[-1])


def print_table(results: list[dict]) -> None:
    header = ("backend", "operation", "store ms", "raw ms", "ratio", "target", "result")
    rows = [header]
    for result in results:
        for row in result["rows"]:
            rows.append(
                (
                    result["config"],
                    row["operation"],
                    _ms(row.get("store")),
                    _ms(row.get("raw")),
                    f"{row['ratio']:.2f}x" if row.get("ratio") is not None else "",
                    row.get("target", ""),
                    row.get("result", ""),
                )
            )
    widths = [max(len(str(row[i])) for row in rows) for i in range(len(header))]
    for index, row in enumerate(rows):
        print(" | ".join(str(cell).ljust(width) for cell, width in zip(row, widths, strict=True)))
        if index == 0:
            print("-|-".join("-" * width for width in widths))


def _ms(value) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return f"{value:.3f}"


def parent(configs: list[str], sandbox_runs: int) -> int:
    started = time.monotonic()
    results = []
    with tempfile.TemporaryDirectory(prefix="jarvis-bench-") as scratch_root:
        for config in configs:
            scratch = Path(scratch_root) / config
            scratch.mkdir()
            log(f"== {config}")
            result = run_config(config, scratch, sandbox_runs)
            if result is not None:
                results.append(result)
    print()
    print_table(results)
    missed = [
        f"{result['config']} {row['operation']}"
        for result in results
        for row in result["rows"]
        if row.get("result") == "MISSED"
    ]
    print()
    print(f"missed targets: {', '.join(missed) if missed else 'none'}")
    print(f"total time: {time.monotonic() - started:.0f} s")
    return 0


# --- the child: one configuration, store and raw side by side ---------------------------


def median_ms(samples: list[float]) -> float:
    return statistics.median(samples) / 1e6


def interleaved(count: int, store_step, raw_step) -> tuple[list[int], list[int]]:
    """Run both sides `count` times, alternating which goes first; nanoseconds per call."""
    store_times: list[int] = []
    raw_times: list[int] = []
    clock = time.perf_counter_ns
    for index in range(count):
        steps = ((store_step, store_times), (raw_step, raw_times))
        if index % 2:
            steps = steps[::-1]
        for step, times in steps:
            started = clock()
            step(index)
            times.append(clock() - started)
    return store_times, raw_times


def database_target(key: str, config: str) -> str | None:
    """Load, branch and delete targets hold for the databases; for jsonl they are figures."""
    return None if config == "jsonl" else key


def compare(operation: str, store_times, raw_times, target_key: str | None) -> dict:
    store_ms, raw_ms = median_ms(store_times), median_ms(raw_times)
    row = {"operation": operation, "store": store_ms, "raw": raw_ms, "ratio": store_ms / raw_ms}
    if target_key is not None:
        limit = TARGETS[target_key]
        row["target"] = f"<= {limit}x"
        row["result"] = "ok" if row["ratio"] <= limit else "MISSED"
    return row


def flatness(operation: str, times: list[int]) -> dict:
    first, last = median_ms(times[:50]), median_ms(times[-50:])
    limit = TARGETS["append flat"]
    return {
        "operation": operation,
        "store": f"{first:.3f} -> {last:.3f}",
        "raw": "",
        "ratio": last / first,
        "target": f"last 50 <= {limit}x first 50",
        "result": "ok" if last / first <= limit else "MISSED",
    }


def text(seed: int, length: int) -> str:
    words = ("session", "entry", "seq", "durable", "branch", "tool", "result", "answer", "turn")
    out = []
    while sum(len(word) + 1 for word in out) < length:
        out.append(words[(seed + len(out) * 7) % len(words)])
    return " ".join(out)[:length]


def turn_entries(turn: int):
    """A realistic turn: question, a tool call, its result, the answer (~200-300 chars each)."""
    from sessions_app.store import NewEntry

    turn_id = f"t{turn:05d}"
    call_id = f"call_{turn:05d}"
    usage = {"input_tokens": 900 + turn, "output_tokens": 60}
    return [
        NewEntry(role="user", content=text(turn, 240), turn_id=turn_id),
        NewEntry(
            role="assistant",
            content=text(turn + 1, 200),
            tool_calls=[
                {
                    "id": call_id,
                    "name": "search_notes",
                    "arguments": json.dumps({"query": text(turn + 2, 60), "limit": 5}),
                }
            ],
            model="offline",
            usage=usage,
            turn_id=turn_id,
        ),
        NewEntry(
            role="tool",
            tool_call_id=call_id,
            name="search_notes",
            content=text(turn + 3, 280),
            turn_id=turn_id,
        ),
        NewEntry(
            role="assistant",
            content=text(turn + 4, 260),
            model="offline",
            usage=usage,
            turn_id=turn_id,
        ),
    ]


def entry_columns(entry) -> tuple:
    return (
        entry.kind,
        entry.role,
        entry.content,
        None if entry.tool_calls is None else json.dumps(entry.tool_calls, ensure_ascii=False),
        entry.tool_call_id,
        entry.name,
        entry.is_error,
        entry.model,
        None if entry.usage is None else json.dumps(entry.usage, ensure_ascii=False),
        entry.turn_id,
        None if entry.data is None else json.dumps(entry.data, ensure_ascii=False),
    )


class RawDb:
    """The same SQL effect as DbSessionStore, straight through sqlite3 or psycopg."""

    COLUMNS = (
        "seq, kind, role, content, tool_calls, tool_call_id, name, is_error, model, usage, "
        "turn_id, data, v, created_at"
    )
    META = (
        "id, agent, owner_id, title, parent_id, branched_at_seq, created_at, updated_at, "
        "last_seq, incarnation, model, spawned_by, thinking"
    )

    def __init__(self, vendor: str, settings_dict: dict):
        self.vendor = vendor
        if vendor == "postgresql":
            import psycopg

            self.db = psycopg.connect(
                host=settings_dict["HOST"],
                port=settings_dict["PORT"] or 5432,
                user=settings_dict["USER"],
                dbname=settings_dict["NAME"],
                autocommit=True,
            )
            self.mark = "%s"
        else:
            import sqlite3

            self.db = sqlite3.connect(settings_dict["NAME"], isolation_level=None)
            # The same pragmas Django's connection gets from settings.
            self.db.execute("PRAGMA journal_mode=WAL")
            self.db.execute("PRAGMA synchronous=NORMAL")
            self.mark = "?"

    def sql(self, statement: str) -> str:
        return statement.replace("%s", self.mark)

    def timestamp(self, value: datetime):
        # Django stores naive UTC text on SQLite and timestamptz on PostgreSQL.
        return value if self.vendor == "postgresql" else str(value.replace(tzinfo=None))

    def decode_timestamp(self, value) -> datetime:
        if isinstance(value, datetime):
            return value
        return datetime.fromisoformat(value).replace(tzinfo=UTC)

    def transaction(self):
        if self.vendor == "postgresql":
            return self.db.transaction()
        return _SqliteImmediate(self.db)

    def append(self, session_id: str, entries, table: str = "sessions_app_entry") -> None:
        now = datetime.now(UTC)
        stamp = self.timestamp(now)
        row_marks = "(" + ", ".join([self.mark] * 15) + ")"
        with self.transaction():
            last_seq = self.db.execute(
                self.sql(
                    "UPDATE sessions_app_session SET last_seq = last_seq + %s, updated_at = %s "
                    "WHERE id = %s RETURNING last_seq"
                ),
                (len(entries), stamp, session_id),
            ).fetchone()[0]
            first = last_seq - len(entries) + 1
            params: list = []
            for offset, entry in enumerate(entries):
                params.append(session_id)
                params.append(first + offset)
                params.extend(entry_columns(entry))
                params.append(1)  # the schema version, as the store writes it
                params.append(stamp)
            self.db.execute(
                f"INSERT INTO {table} (session_id, {self.COLUMNS}) VALUES "
                + ", ".join([row_marks] * len(entries)),
                params,
            )

    def create_unindexed_entry_table(self) -> None:
        """A copy of the entry table (columns, constraints, indexes) without the search index."""
        if self.vendor == "postgresql":
            self.db.execute(
                f"CREATE TABLE {UNINDEXED_ENTRY} (LIKE sessions_app_entry INCLUDING ALL)"
            )
            # Dropping the generated column drops its GIN index with it.
            self.db.execute(f"ALTER TABLE {UNINDEXED_ENTRY} DROP COLUMN search_vector")
            self.db.execute(
                f"ALTER TABLE {UNINDEXED_ENTRY} ADD FOREIGN KEY (session_id) "
                "REFERENCES sessions_app_session (id) DEFERRABLE INITIALLY DEFERRED"
            )
            return
        # SQLite: the table's own CREATE statements; the FTS5 triggers are not copied.
        statements = self.db.execute(
            "SELECT type, sql FROM sqlite_master WHERE tbl_name = 'sessions_app_entry' "
            "AND type IN ('table', 'index') AND sql IS NOT NULL ORDER BY type DESC"
        ).fetchall()
        for kind, statement in statements:
            statement = statement.replace('"sessions_app_entry"', f'"{UNINDEXED_ENTRY}"')
            if kind == "index":
                statement = re.sub(r'INDEX "([^"]+)"', r'INDEX "bench_\1"', statement, count=1)
            self.db.execute(statement)

    def load(self, session_id: str) -> list:
        rows = self.db.execute(
            self.sql(
                f"SELECT {self.COLUMNS} FROM sessions_app_entry WHERE session_id = %s ORDER BY seq"
            ),
            (session_id,),
        ).fetchall()
        loads, decode_timestamp = json.loads, self.decode_timestamp

        def value(column):
            return loads(column) if isinstance(column, str) else column

        return [
            (
                seq,
                kind,
                role,
                content,
                value(tool_calls),
                tool_call_id,
                name,
                bool(is_error),
                model,
                value(usage),
                turn_id,
                value(data),
                decode_timestamp(created_at),
                version,
            )
            for (
                seq,
                kind,
                role,
                content,
                tool_calls,
                tool_call_id,
                name,
                is_error,
                model,
                usage,
                turn_id,
                data,
                version,
                created_at,
            ) in rows
        ]

    def branch(self, source_id: str, new_id: str) -> None:
        now = self.timestamp(datetime.now(UTC))
        with self.transaction():
            agent, owner_id, title, last_seq, model = self.db.execute(
                self.sql(
                    "SELECT agent, owner_id, title, last_seq, model FROM sessions_app_session "
                    "WHERE id = %s"
                ),
                (source_id,),
            ).fetchone()
            self.db.execute(
                self.sql(
                    "INSERT INTO sessions_app_session (id, agent, owner_id, title, parent_id, "
                    "branched_at_seq, created_at, updated_at, last_seq, lease_holder, model, "
                    "incarnation) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, '', %s, %s)"
                ),
                (
                    new_id,
                    agent,
                    owner_id,
                    title,
                    source_id,
                    last_seq,
                    now,
                    now,
                    last_seq,
                    model,
                    uuid.uuid4().hex,
                ),
            )
            self.db.execute(
                self.sql(
                    f"INSERT INTO sessions_app_entry (session_id, {self.COLUMNS}) "
                    f"SELECT %s, {self.COLUMNS} FROM sessions_app_entry "
                    "WHERE session_id = %s AND seq <= %s"
                ),
                (new_id, source_id, last_seq),
            )

    def delete(self, session_id: str) -> None:
        with self.transaction():
            for table in (
                "sessions_app_entry",
                "sessions_app_proactivenotice",
                "sessions_app_liveconnection",
                "sessions_app_toolapproval",
            ):
                self.db.execute(
                    self.sql(f"DELETE FROM {table} WHERE session_id = %s"), (session_id,)
                )
            self.db.execute(
                self.sql("UPDATE sessions_app_session SET parent_id = NULL WHERE parent_id = %s"),
                (session_id,),
            )
            self.db.execute(
                self.sql("DELETE FROM sessions_app_session WHERE id = %s"), (session_id,)
            )

    def list(self) -> list:
        rows = self.db.execute(
            f"SELECT {self.META} FROM sessions_app_session ORDER BY updated_at DESC, id DESC"
        ).fetchall()
        decode = self.decode_timestamp
        return [(*row[:6], decode(row[6]), decode(row[7]), *row[8:]) for row in rows]

    def list_card(self, owner_id: int) -> list[dict]:
        """One owner's sessions (sub-agents' left out) in the API's shape, as the page gets them."""
        rows = self.db.execute(
            self.sql(
                f"SELECT {self.META}, pinned, archived FROM sessions_app_session "
                "WHERE owner_id = %s AND spawned_by IS NULL AND archived = %s "
                "ORDER BY pinned DESC, updated_at DESC, id DESC"
            ),
            (owner_id, False),
        ).fetchall()
        return [_card(row, self.decode_timestamp) for row in rows]

    def add_sessions(self, count: int, owner_id: int) -> None:
        now = self.timestamp(datetime.now(UTC))
        rows = [
            (f"listed-{number:05d}", "jarvis", owner_id, f"session {number}", now, now)
            for number in range(count)
        ]
        with self.transaction():
            for start in range(0, count, 200):
                chunk = rows[start : start + 200]
                marks = ", ".join(
                    ["(" + ", ".join([self.mark] * 6) + ", 0, '', '', '')"] * len(chunk)
                )
                self.db.execute(
                    "INSERT INTO sessions_app_session (id, agent, owner_id, title, created_at, "
                    f"updated_at, last_seq, lease_holder, incarnation, model) VALUES {marks}",
                    [value for row in chunk for value in row],
                )


def _card(row, decode) -> dict:
    (
        session_id,
        agent,
        _owner,
        title,
        parent_id,
        branched_at_seq,
        created,
        updated,
        last,
        _incarnation,
        model,
        spawned_by,
        thinking,
        pinned,
        archived,
    ) = row
    return {
        "id": session_id,
        "agent": agent,
        "title": title,
        "parent_id": parent_id,
        "branched_at_seq": branched_at_seq,
        "created_at": decode(created).isoformat(),
        "updated_at": decode(updated).isoformat(),
        "last_seq": last,
        "model": model,
        "spawned_by": spawned_by,
        "thinking": thinking,
        "pinned": bool(pinned),
        "archived": bool(archived),
    }


class _SqliteImmediate:
    """BEGIN IMMEDIATE … COMMIT, as Django's connection does with transaction_mode IMMEDIATE."""

    def __init__(self, db):
        self.db = db

    def __enter__(self):
        self.db.execute("BEGIN IMMEDIATE")

    def __exit__(self, kind, value, traceback):
        self.db.execute("COMMIT" if kind is None else "ROLLBACK")


class RawJsonl:
    """Plain files, the minimum the jsonl store's job needs."""

    def __init__(self, root: Path):
        self.root = root
        self.index = None

    def append(self, session_id: str, entries, first_seq: int, indexed: bool = True) -> None:
        now = datetime.now(UTC)
        stamp = now.isoformat()
        payload = b"".join(
            json.dumps(
                {"seq": first_seq + offset, **_entry_dict(entry), "created_at": stamp},
                ensure_ascii=False,
            ).encode()
            + b"\n"
            for offset, entry in enumerate(entries)
        )
        with open(self.root / f"{session_id}.jsonl", "ab") as handle:
            handle.write(payload)
            handle.flush()
            os.fsync(handle.fileno())
        if indexed:
            self.add_to_index(session_id, entries, first_seq, stamp)

    def index_db(self):
        if self.index is None:
            import sqlite3

            from sessions_app.store.jsonl_search import INDEX_FILE

            self.index = sqlite3.connect(self.root / INDEX_FILE, isolation_level=None)
            self.index.execute("PRAGMA synchronous=NORMAL")
        return self.index

    def add_to_index(self, session_id: str, entries, first_seq: int, stamp: str) -> None:
        """The same rows, in the same transaction shape, as the store's search index."""
        db = self.index_db()
        db.execute("BEGIN IMMEDIATE")
        db.execute("SELECT indexed_seq FROM session WHERE id = ?", (session_id,)).fetchone()
        db.executemany(
            "INSERT INTO entry (session_id, seq, role, created_at, content) VALUES (?, ?, ?, ?, ?)",
            [
                (session_id, first_seq + offset, entry.role, stamp, entry.content)
                for offset, entry in enumerate(entries)
                if entry.kind == "message" and entry.role in ("user", "assistant") and entry.content
            ],
        )
        db.execute(
            "INSERT INTO session (id, owner_id, indexed_seq) VALUES (?, NULL, ?) "
            "ON CONFLICT (id) DO UPDATE SET indexed_seq = excluded.indexed_seq",
            (session_id, first_seq + len(entries) - 1),
        )
        db.execute("COMMIT")

    def load(self, session_id: str) -> list:
        records = []
        with open(self.root / f"{session_id}.jsonl", "rb") as handle:
            for line in handle.read().splitlines():
                record = json.loads(line)
                record["created_at"] = datetime.fromisoformat(record["created_at"])
                records.append(record)
        return records

    def branch(self, source_id: str, new_id: str) -> None:
        target = self.root / f"{new_id}.jsonl"
        shutil.copyfile(self.root / f"{source_id}.jsonl", target)
        with open(target, "rb+") as handle:
            os.fsync(handle.fileno())
        meta = read_meta(self.root / f"{source_id}.meta.json")
        meta.update(id=new_id, parent_id=source_id, branched_at_seq=meta["last_seq"])
        temporary = self.root / f"{new_id}.meta.json.tmp"
        with open(temporary, "w", encoding="utf-8") as handle:
            handle.write(json.dumps(meta) + "\n")
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, self.root / f"{new_id}.meta.json")
        db = self.index_db()
        db.execute("BEGIN IMMEDIATE")
        db.execute(
            "INSERT INTO entry (session_id, seq, role, created_at, content) "
            "SELECT ?, seq, role, created_at, content FROM entry WHERE session_id = ? AND seq <= ?",
            (new_id, source_id, meta["last_seq"]),
        )
        db.execute(
            "INSERT INTO session (id, owner_id, indexed_seq) VALUES (?, NULL, ?)",
            (new_id, meta["last_seq"]),
        )
        db.execute("COMMIT")

    def delete(self, session_id: str) -> None:
        db = self.index_db()
        db.execute("BEGIN IMMEDIATE")
        db.execute("DELETE FROM entry WHERE session_id = ?", (session_id,))
        db.execute("DELETE FROM session WHERE id = ?", (session_id,))
        db.execute("COMMIT")
        for suffix in (".jsonl", ".meta.json", ".proactive.jsonl"):
            (self.root / f"{session_id}{suffix}").unlink(missing_ok=True)

    def list(self) -> list:
        metas = []
        for path in self.root.glob("*.meta.json"):
            meta = read_meta(path)
            meta["created_at"] = datetime.fromisoformat(meta["created_at"])
            meta["updated_at"] = datetime.fromisoformat(meta["updated_at"])
            metas.append(meta)
        metas.sort(key=lambda meta: (meta["updated_at"], meta["id"]), reverse=True)
        return metas

    def list_card(self, owner_id: int) -> list[dict]:
        cards = []
        for meta in self.list():
            if meta.get("owner_id") == owner_id and meta.get("spawned_by") is None:
                cards.append(
                    {
                        "id": meta["id"],
                        "agent": meta["agent"],
                        "title": meta["title"],
                        "parent_id": meta["parent_id"],
                        "branched_at_seq": meta["branched_at_seq"],
                        "created_at": meta["created_at"].isoformat(),
                        "updated_at": meta["updated_at"].isoformat(),
                        "last_seq": meta["last_seq"],
                        "model": meta.get("model", ""),
                        "spawned_by": meta.get("spawned_by"),
                        "thinking": meta.get("thinking", "off"),
                        "pinned": meta.get("pinned", False),
                        "archived": meta.get("archived", False),
                    }
                )
        # The page's order: pinned first, then newest activity (a stable sort).
        cards.sort(key=lambda card: not card["pinned"])
        return [card for card in cards if not card["archived"]]


def read_meta(path: Path) -> dict:
    """The meta file's first line, updated by its last activity line (the jsonl format)."""
    lines = path.read_bytes().splitlines()
    meta = json.loads(lines[0])
    if len(lines) > 1:
        meta.update(json.loads(lines[-1]))
    return meta


def _entry_dict(entry) -> dict:
    return {field: getattr(entry, field) for field in entry.__dataclass_fields__}


def search_vocabulary(rng: random.Random) -> list[str]:
    """Made-up words, so that no stemmer or stop-word list treats them specially."""
    consonants, vowels = "bcdfghjklmnprstvz", "aeiou"
    seen: set[str] = set()
    words: list[str] = []
    while len(words) < SEARCH_VOCABULARY:
        syllables = rng.randint(2, 4)
        word = "".join(rng.choice(consonants) + rng.choice(vowels) for _ in range(syllables))
        if word not in seen:
            seen.add(word)
            words.append(word)
    return words


def search_corpus():
    """1,000 sessions of 25 turns (100 entries), and the queries to time.

    Word frequencies follow Zipf's law, as in real text, so the queries can be chosen by how
    many messages contain them: a rare word (~10 messages), a word in ~1% and in ~10% of the
    entries, two words together, a quoted phrase and an `or`.
    """
    from collections import Counter
    from itertools import accumulate

    from sessions_app.store import NewEntry

    rng = random.Random(42)
    words = search_vocabulary(rng)
    weights = list(accumulate(1 / rank for rank in range(1, len(words) + 1)))

    def sentence(low: int, high: int) -> str:
        return " ".join(rng.choices(words, cum_weights=weights, k=rng.randint(low, high)))

    sessions = []
    messages_with: Counter[str] = Counter()
    for _ in range(SEARCH_SESSIONS):
        entries = []
        for turn in range(SEARCH_TURNS):
            call = {"id": f"call_{turn}", "name": "search_notes", "arguments": "{}"}
            question, intro, answer = sentence(8, 40), sentence(4, 12), sentence(15, 60)
            entries += [
                NewEntry(role="user", content=question),
                NewEntry(role="assistant", content=intro, tool_calls=[call]),
                NewEntry(
                    role="tool",
                    tool_call_id=call["id"],
                    name="search_notes",
                    content=sentence(30, 80),
                ),
                NewEntry(role="assistant", content=answer),
            ]
            for text in (question, intro, answer):
                messages_with.update(set(text.split()))
        sessions.append(entries)

    def near(count: int, skip: tuple[str, ...] = ()) -> str:
        return min(
            (word for word in messages_with if word not in skip),
            key=lambda word: (abs(messages_with[word] - count), word),
        )

    rare, one, ten = near(10), near(1000), near(10_000)
    other = near(1000, skip=(one,))
    phrase = " ".join(sessions[SEARCH_SESSIONS // 2][0].content.split()[:2])
    queries = [
        (rare, f"a rare word ({messages_with[rare]} messages)"),
        (one, f"a word in {messages_with[one]} messages"),
        (ten, f"a word in {messages_with[ten]} messages"),
        (f"{one} {other}", "two words, both"),
        (f'"{phrase}"', "a quoted phrase"),
        (f"{rare} or {one}", "one word or another"),
    ]
    return sessions, queries


def search_rows(store, config: str) -> list[dict]:
    from django.contrib.auth import get_user_model
    from django.db import connection

    sessions, queries = search_corpus()
    # jsonl meta files need no user row.
    owner = 1 if config == "jsonl" else get_user_model().objects.create_user("bench-search").id
    for number, entries in enumerate(sessions):
        session_id = f"search-{number:04d}"
        store.create(session_id, owner_id=owner, title=f"conversation {number}")
        store.append(session_id, entries)
    if config == "postgres":
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE")  # what autovacuum does after a bulk load
    total = SEARCH_SESSIONS * SEARCH_TURNS * 4
    rows = []
    every: list[int] = []
    clock = time.perf_counter_ns
    for query, label in queries:
        assert store.search(owner, query, 21, 0), f"no hits for {query!r}"
        gc.collect()
        times = []
        for _ in range(SEARCH_RUNS):
            started = clock()
            store.search(owner, query, 21, 0)  # a page of 20, plus one to see if more follow
            times.append(clock() - started)
        every += times
        rows.append(search_row(f"search {total:,} entries: {label}", times))
    rows.append(search_row(f"search {total:,} entries: all queries", every))
    return rows


def large_message_search_rows(store, config: str) -> list[dict]:
    """Twelve messages of 100,000 characters: a query that matches every tenth word of all
    of them, and a word said once, at the very end of each."""
    from django.contrib.auth import get_user_model

    from sessions_app.store import NewEntry

    rng = random.Random(7)
    messages = []
    for _ in range(LARGE_MESSAGES):
        words, length = [], 0
        while length < LARGE_MESSAGE_CHARS - 20:
            word = rng.choice(LOREM)
            words.append(word)
            length += len(word) + 1
        messages.append(" ".join(words)[: LARGE_MESSAGE_CHARS - 10] + " pelican.")
    owner = 2 if config == "jsonl" else get_user_model().objects.create_user("bench-large").id
    store.create("large-messages", owner_id=owner, title="long pastes")
    store.append("large-messages", [NewEntry(role="user", content=text) for text in messages])
    rows = []
    for query, label in (("lorem or ipsum", "`lorem or ipsum`"), ("pelican", "a word at the end")):
        hits = store.search(owner, query, 21, 0)
        assert len(hits) == LARGE_MESSAGES, f"{len(hits)} hits for {query!r}"
        gc.collect()
        times = []
        for _ in range(LARGE_SEARCH_RUNS):
            started = time.perf_counter_ns()
            store.search(owner, query, 21, 0)
            times.append(time.perf_counter_ns() - started)
        operation = f"search {LARGE_MESSAGES} messages of 100 KB: {label}"
        for name, value in (
            ("p50", median_ms(times)),
            ("p99", statistics.quantiles(times, n=100)[98] / 1e6),
        ):
            rows.append(
                {
                    "operation": f"{operation}, {name}",
                    "store": value,
                    "raw": "",
                    "target": f"{name} <= {LARGE_SEARCH_TARGET_MS} ms",
                    "result": "ok" if value <= LARGE_SEARCH_TARGET_MS else "MISSED",
                }
            )
    return rows


def search_row(operation: str, times: list[int]) -> dict:
    p50 = median_ms(times)
    return {
        "operation": operation,
        "store": p50,
        "raw": "",
        "target": f"p50 <= {SEARCH_TARGET_MS} ms",
        "result": "ok" if p50 <= SEARCH_TARGET_MS else "MISSED",
    }


def index_cost_row(config: str, store, raw, turns) -> dict:
    """The raw append into the indexed entry table against one into a copy without it."""
    if config == "jsonl":

        def indexed(turn):
            raw.append("cost-indexed", turns[turn], turn * 4 + 1)

        def unindexed(turn):
            raw.append("cost-unindexed", turns[turn], turn * 4 + 1, indexed=False)

    else:
        raw.create_unindexed_entry_table()
        store.create("cost-indexed")
        store.create("cost-unindexed")

        def indexed(turn):
            raw.append("cost-indexed", turns[turn])

        def unindexed(turn):
            raw.append("cost-unindexed", turns[turn], table=UNINDEXED_ENTRY)

    gc.collect()
    with_index, without_index = interleaved(TURNS, indexed, unindexed)
    return compare(
        "append cost of the search index (raw: with / without)", with_index, without_index, None
    )


def whole_turn(turn: int):
    """`turn_entries` as the runtime stores a turn: between its turn_start and turn_end."""
    from sessions_app.store import NewEntry

    entries = turn_entries(turn)
    turn_id = entries[0].turn_id
    return [
        NewEntry(kind="turn_start", turn_id=turn_id, data={"model": "offline"}),
        *entries,
        NewEntry(kind="turn_end", turn_id=turn_id, data={"status": "completed", "error": ""}),
    ]


def session_of(store, session_id: str, size: int) -> None:
    """A session of `size` entries of whole turns; one longer than a turn holds a compaction
    that keeps its last turn, as a long conversation has (the turn loop compacts it)."""
    from sessions_app.store import NewEntry

    store.create(session_id)
    turns = [whole_turn(turn) for turn in range(size // 6)]
    for start in range(0, len(turns), 100):
        store.append(session_id, [entry for turn in turns[start : start + 100] for entry in turn])
    last_turn = store.get_messages(session_id)[-6]
    assert last_turn.kind == "turn_start"
    if size > 6:
        summary = {"summary": "earlier turns", "first_kept_seq": last_turn.seq, "reason": "auto"}
        store.append(session_id, [NewEntry(kind="compaction", data=summary)])
    missing = size - len(store.get_messages(session_id))
    store.append(session_id, [NewEntry(kind="note") for _ in range(missing)])


def turn_start_row() -> dict:
    """A whole turn (offline model) in a session of LONG_SESSION_ENTRIES against one of
    SHORT_SESSION_ENTRIES: the long one reads from its latest compaction on, so the two
    cost the same."""
    from sessions_app.runtime.turn.turns import turn_run
    from sessions_app.store import get_store

    store = get_store()
    session_of(store, "turns-long", LONG_SESSION_ENTRIES)
    session_of(store, "turns-short", SHORT_SESSION_ENTRIES)
    assert len(store.get_messages("turns-long")) == LONG_SESSION_ENTRIES

    def turn(session_id):
        result = turn_run(session_id=session_id, text="what is 2+2?", provider="offline")
        assert result.status == "completed", result.error

    gc.collect()
    long_times, short_times = interleaved(
        TURN_STARTS, lambda _: turn("turns-long"), lambda _: turn("turns-short")
    )
    row = compare(
        f"turn in a session of {LONG_SESSION_ENTRIES:,} entries (raw: one of "
        f"{SHORT_SESSION_ENTRIES})",
        long_times,
        short_times,
        "turn start",
    )
    return row


def child(config: str, sandbox_runs: int) -> int:
    sys.path.insert(0, str(REPO))  # run as a script, bench/ is first on the path
    import django

    django.setup()
    from django.conf import settings
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.db import connection

    from sessions_app.selectors import session_list
    from sessions_app.store import get_store

    log(f"{config}: migrating the scratch database")
    call_command("migrate", verbosity=0, interactive=False)
    if config == "sandbox":
        # The sandbox's rows stand apart from the store's: a run on the SQLite database.
        from sandbox_bench import sandbox_rows

        log(f"sandbox: print(1) runs, {sandbox_runs} per workspace size, beside bare bwrap")
        print(json.dumps({"config": config, "rows": sandbox_rows(sandbox_runs)}))
        return 0
    store = get_store()
    if config == "jsonl":
        raw = RawJsonl(Path(settings.SESSIONS_DIR))
        raw_append = lambda session_id, entries, turn: raw.append(session_id, entries, turn * 4 + 1)  # noqa: E731
    else:
        raw = RawDb(connection.vendor, connection.settings_dict)
        raw_append = lambda session_id, entries, turn: raw.append(session_id, entries)  # noqa: E731

    rows = []
    store.search(0, "nothing")  # opens every index, so the raw side finds the jsonl one
    store.create("bench-store", title="appended by the store")
    store.create("bench-raw", title="appended by the raw driver")
    turns = [turn_entries(turn) for turn in range(TURNS)]

    log(f"{config}: append, {TURNS} turns of 4 entries into one session, each side")
    gc.collect()
    store_times, raw_times = interleaved(
        TURNS,
        lambda turn: store.append("bench-store", turns[turn]),
        lambda turn: raw_append("bench-raw", turns[turn], turn),
    )
    rows.append(compare("append, ms per turn (all 500)", store_times, raw_times, "append"))
    rows.append(compare("append, first 50 turns", store_times[:50], raw_times[:50], None))
    rows.append(compare("append, last 50 turns", store_times[-50:], raw_times[-50:], None))
    rows.append(flatness("append flat (store first 50 -> last 50)", store_times))
    if config == "jsonl":
        # The raw side wrote its own lines; the store's meta must agree so both are loadable.
        assert len(store.get_messages("bench-raw")) == TURNS * 4
    else:
        assert len(raw.load("bench-raw")) == TURNS * 4
    assert len(store.get_messages("bench-store")) == TURNS * 4

    log(f"{config}: load the {TURNS * 4}-entry history, {LOADS} times each side")
    gc.collect()
    store_times, raw_times = interleaved(
        LOADS,
        lambda _: store.get_messages("bench-store"),
        lambda _: raw.load("bench-store"),
    )
    rows.append(
        compare(
            f"load {TURNS * 4} entries", store_times, raw_times, database_target("load", config)
        )
    )

    log(f"{config}: branch (copy) the {TURNS * 4}-entry session, {COPIES} times each side")
    gc.collect()
    store_times, raw_times = interleaved(
        COPIES,
        lambda index: store.create_branch("bench-store", new_id=f"copy-store-{index}"),
        lambda index: raw.branch("bench-store", f"copy-raw-{index}"),
    )
    assert (
        len(store.get_messages("copy-raw-0"))
        == len(store.get_messages("copy-store-0"))
        == TURNS * 4
    )
    rows.append(
        compare(
            f"branch {TURNS * 4} entries", store_times, raw_times, database_target("branch", config)
        )
    )

    log(f"{config}: delete a {TURNS * 4}-entry session, {COPIES} times each side")
    gc.collect()
    store_times, raw_times = interleaved(
        COPIES,
        lambda index: store.delete(f"copy-store-{index}"),
        lambda index: raw.delete(f"copy-raw-{index}"),
    )
    assert store.get_meta("copy-store-0") is None and store.get_meta("copy-raw-0") is None
    rows.append(
        compare(
            f"delete {TURNS * 4} entries", store_times, raw_times, database_target("delete", config)
        )
    )

    log(f"{config}: list {LISTED_SESSIONS} sessions")
    if config == "jsonl":
        owner_id = 1  # jsonl keeps the id; its meta files point into no user table
        for number in range(LISTED_SESSIONS - 2):
            session_id = f"listed-{number:05d}"
            store.create(session_id, title=f"session {number}", owner_id=owner_id)
            store.append(session_id, turns[number % TURNS][:1])
    else:
        owner_id = get_user_model().objects.create(username="bench-owner").id
        raw.add_sessions(LISTED_SESSIONS - 2, owner_id)
    gc.collect()
    store_times, raw_times = interleaved(LISTS, lambda _: store.list(), lambda _: raw.list())
    assert len(store.list()) == len(raw.list()) == LISTED_SESSIONS
    rows.append(
        compare(
            f"list {LISTED_SESSIONS} sessions",
            store_times,
            raw_times,
            database_target("list", config),
        )
    )
    # What the web page's list reads: the API's selector for one owner, in the API's shape.
    card = lambda _: session_list(owner_id=owner_id)  # noqa: E731
    store_times, raw_times = interleaved(LISTS, card, lambda _: raw.list_card(owner_id))
    assert card(0) == raw.list_card(owner_id) and len(card(0)) == LISTED_SESSIONS - 2
    rows.append(
        compare(
            f"list for the web page ({LISTED_SESSIONS - 2}, API shape)",
            store_times,
            raw_times,
            database_target("list", config),
        )
    )
    if config == "jsonl":
        opened = spy_on_opened_paths(store.list)
        reads_no_entry_file = not any(path.endswith(".jsonl") for path in opened)
        rows.append(
            {
                "operation": "list reads no entry file",
                "store": "yes" if reads_no_entry_file else "no",
                "raw": f"{sum(p.endswith('.meta.json') for p in opened)} meta files read",
                "target": "yes",
                "result": "ok" if reads_no_entry_file else "MISSED",
            }
        )
    log(f"{config}: a turn in a session of {LONG_SESSION_ENTRIES:,} entries and one of 10")
    rows.append(turn_start_row())
    log(f"{config}: what the search index costs an append")
    rows.append(index_cost_row(config, store, raw, turns))

    log(f"{config}: search over {SEARCH_SESSIONS * SEARCH_TURNS * 4:,} entries")
    rows.extend(search_rows(store, config))
    log(f"{config}: search over {LARGE_MESSAGES} messages of 100 KB")
    rows.extend(large_message_search_rows(store, config))
    print(json.dumps({"config": config, "rows": rows}))
    return 0


def spy_on_opened_paths(call) -> list[str]:
    """Every path opened while `call` runs (builtins.open, io.open as pathlib uses it, os.open)."""
    opened: list[str] = []
    originals = (builtins.open, io.open, os.open)

    def spy(real):
        def wrapper(file, *args, **kwargs):
            opened.append(str(file))
            return real(file, *args, **kwargs)

        return wrapper

    builtins.open, io.open, os.open = (spy(original) for original in originals)
    try:
        call()
    finally:
        builtins.open, io.open, os.open = originals
    return opened


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--child", choices=CONFIGS, help=argparse.SUPPRESS)
    parser.add_argument(
        "--configs",
        default=",".join(CONFIGS),
        help=f"which to run, comma-separated (default: all of {', '.join(CONFIGS)})",
    )
    parser.add_argument(
        "--sandbox-runs",
        type=int,
        default=SANDBOX_RUNS,
        help="print(1) runs per workspace size (fewer on a shared machine)",
    )
    args = parser.parse_args()
    if args.child:
        return child(args.child, args.sandbox_runs)
    configs = [config for config in args.configs.split(",") if config]
    unknown = set(configs) - set(CONFIGS)
    if unknown:
        parser.error(f"unknown configuration: {', '.join(sorted(unknown))}")
    return parent(configs, args.sandbox_runs)


if __name__ == "__main__":
    sys.exit(main())
