"""Peak memory of "download everything" (`GET /api/me/export/`, docs/design.md §21).

    .venv/bin/python bench/export_memory.py [--sessions 1000] [--entries 100]

Fills a scratch SQLite database (or the PostgreSQL server of BENCH_POSTGRES_URL with
`--postgres`, in a scratch database dropped at the end) with one user owning SESSIONS
sessions of ENTRIES entries each, then, in a fresh child process, streams that user's zip
into nothing and reports: the zip's size, the Python heap's peak while streaming
(tracemalloc), and the process's resident peak (VmHWM from /proc) before and after. The
archive is never held whole, so the peak should stay near one session's rendering however
many sessions there are. Reports, never gates.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PG_SERVER_URL = os.environ.get("BENCH_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432")
SCRATCH_DB = "jarvis_bench_export"


def _django(database_url: str) -> None:
    os.environ["DATABASE_URL"] = database_url
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "jarvis_site.settings")
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()


def _vm_hwm_kib() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return 0


def fill(database_url: str, sessions: int, entries: int) -> None:
    _django(database_url)
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.utils import timezone

    from sessions_app.models import Entry, Session

    call_command("migrate", verbosity=0)
    owner = get_user_model().objects.create_user(username="archivist", password="x")
    now = timezone.now()
    text = "A sentence of an ordinary conversation, long enough to look like one. " * 3
    for number in range(sessions):
        session = Session.objects.create(
            id=f"chat-{number:05d}",
            owner=owner,
            title=f"Conversation {number}",
            created_at=now,
            updated_at=now,
            last_seq=entries,
        )
        Entry.objects.bulk_create(
            Entry(
                session=session,
                seq=seq,
                kind="message",
                role="user" if seq % 2 else "assistant",
                content=f"{seq}: {text}",
                turn_id=f"t{seq // 2}",
                created_at=now,
            )
            for seq in range(1, entries + 1)
        )


def measure(database_url: str) -> dict:
    _django(database_url)
    import tracemalloc

    from django.contrib.auth import get_user_model

    from accounts_app.archive import user_data_zip

    owner_id = get_user_model().objects.get(username="archivist").pk
    rss_before = _vm_hwm_kib()
    tracemalloc.start()
    size = 0
    chunks = 0
    for chunk in user_data_zip(owner_id=owner_id):
        size += len(chunk)
        chunks += 1
    _current, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return {
        "zip_bytes": size,
        "chunks": chunks,
        "python_peak_bytes": peak,
        "rss_peak_before_kib": rss_before,
        "rss_peak_after_kib": _vm_hwm_kib(),
    }


def _child(mode: str, database_url: str, *extra: str) -> str:
    return subprocess.run(
        [sys.executable, __file__, f"--{mode}", database_url, *extra],
        check=True,
        capture_output=True,
        text=True,
        cwd=ROOT,
    ).stdout


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sessions", type=int, default=1000)
    parser.add_argument("--entries", type=int, default=100)
    parser.add_argument("--postgres", action="store_true")
    parser.add_argument("--fill", metavar="DATABASE_URL")
    parser.add_argument("--measure", metavar="DATABASE_URL")
    args = parser.parse_args()
    if args.fill:
        fill(args.fill, args.sessions, args.entries)
        return
    if args.measure:
        print(json.dumps(measure(args.measure)))
        return
    with tempfile.TemporaryDirectory() as scratch:
        if args.postgres:
            import psycopg

            with psycopg.connect(f"{PG_SERVER_URL}/postgres", autocommit=True) as admin:
                admin.execute(f"DROP DATABASE IF EXISTS {SCRATCH_DB}")
                admin.execute(f"CREATE DATABASE {SCRATCH_DB}")
            database_url = f"{PG_SERVER_URL}/{SCRATCH_DB}"
        else:
            database_url = f"sqlite:///{scratch}/export.sqlite3"
        try:
            _child(
                "fill",
                database_url,
                "--sessions",
                str(args.sessions),
                "--entries",
                str(args.entries),
            )
            result = json.loads(_child("measure", database_url))
        finally:
            if args.postgres:
                with psycopg.connect(f"{PG_SERVER_URL}/postgres", autocommit=True) as admin:
                    admin.execute(f"DROP DATABASE IF EXISTS {SCRATCH_DB}")
    backend = "postgres" if args.postgres else "sqlite"
    print(f"{backend}: {args.sessions} sessions x {args.entries} entries")
    print(
        f"  zip                 {result['zip_bytes'] / 2**20:8.1f} MiB in {result['chunks']} chunks"
    )
    print(f"  Python heap peak    {result['python_peak_bytes'] / 2**20:8.1f} MiB (tracemalloc)")
    print(
        f"  resident peak       {result['rss_peak_before_kib'] / 1024:8.1f} MiB after setup, "
        f"{result['rss_peak_after_kib'] / 1024:.1f} MiB after the export (VmHWM)"
    )


if __name__ == "__main__":
    main()
