"""Delete and reopen of one session, raced many times: what the per-session lock prevents.

Each round starts from one session with a stored turn (4 entries) and a working-memory fact.
Two actors then run at once, released together by a barrier:

- the deleter calls the real `services.deletion.session_delete`;
- the reopener does what a browser tab does when it (re)connects: `services.connections.connection_open`
  (which creates the session if it is missing), reads the history it would show, writes a
  working-memory note inside `store.fenced`, and closes the connection again.

With threads (the default) the interleaving is decided by a scheduler, not by the operating
system: the two actors run one at a time, and before every SQL statement either of them sends,
the scheduler picks which one goes on, from a generator seeded for that round. It knows what a
database would make an actor wait for — while one actor holds a transaction, the other may
read but not write or begin one (SQLite's IMMEDIATE transactions, PostgreSQL's row locks) — and
never picks an actor that would wait. So every round interleaves differently, and a run with
the same `--seed` interleaves exactly the same way again: the script prints a digest of every
round's schedule to show it. With `--processes 2` the two actors are real processes and the
operating system interleaves them (a seeded random pause around every storage and memory call
widens the windows in which they overlap): real parallelism, not reproducible.

After the round the state is classified:

- both deleted: no session and no memory left;
- both kept: a session whose history and memory belong together (the original one, or a
  new empty one with only its own memory);
- session without history: the reopener was shown a session whose history was gone;
- inconsistent: anything else, e.g. memory of a session that no longer exists.

With the lock (the default) the last two must stay at 0. `--no-lock` turns the lock off —
a switch only this script sets — to show what happens without it.

    python scripts/experiments/session_race.py --label sqlite-threads
    python scripts/experiments/session_race.py --label sqlite-threads --no-lock
    python scripts/experiments/session_race.py --label pg-2proc --processes 2 --database postgres

The script makes its own scratch database (a temporary SQLite file, or a PostgreSQL database
named `jarvis_race` on 127.0.0.1, dropped and created afresh) and migrates it.
"""

from __future__ import annotations

import argparse
import hashlib
import multiprocessing
import os
import queue
import random
import sys
import tempfile
import threading
import time
from contextlib import nullcontext
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SESSION = "race-session"
OUTCOMES = ("both deleted", "both kept", "session without history", "inconsistent")
POSTGRES_SERVER = "postgres://postgres@127.0.0.1:5432"
SCRATCH_DATABASE = "jarvis_race"


# --- setting up Django on a scratch database -------------------------------------------------
def prepare_database(kind: str) -> str:
    if kind == "sqlite":
        folder = tempfile.mkdtemp(prefix="jarvis-race-")
        return f"sqlite:///{folder}/race.sqlite3"
    import psycopg

    with psycopg.connect(f"{POSTGRES_SERVER}/postgres", autocommit=True) as admin:
        admin.execute(f"DROP DATABASE IF EXISTS {SCRATCH_DATABASE}")
        admin.execute(f"CREATE DATABASE {SCRATCH_DATABASE}")
    return f"{POSTGRES_SERVER}/{SCRATCH_DATABASE}"


def setup_django(database_url: str, *, migrate: bool = False) -> None:
    os.environ["DATABASE_URL"] = database_url
    os.environ["DJANGO_SETTINGS_MODULE"] = "jarvis_site.settings"
    os.environ["WORKER_HEARTBEAT"] = "false"
    os.environ.setdefault("LOG_LEVEL", "WARNING")
    os.environ.setdefault("SESSIONS_DIR", tempfile.mkdtemp(prefix="jarvis-race-sessions-"))
    sys.path.insert(0, str(REPO))
    import django

    django.setup()
    if migrate:
        from django.core.management import call_command

        call_command("migrate", verbosity=0)


# --- the scheduler that decides the interleaving ---------------------------------------------
class Deadlock(RuntimeError):
    pass


class Scheduler:
    """One round's interleaving. Each actor calls `point` before each SQL statement it sends
    and `finish` when its part of the round is done; only the actor the scheduler picked runs,
    the others wait in `point`. Once every live actor waits, the round's generator picks the
    next one among those that a database would not block."""

    def __init__(self, actors: tuple[str, ...], seed: int):
        self._rng = random.Random(seed)
        self._turn = threading.Condition()
        self._live = set(actors)
        self._waiting: dict[str, str] = {}  # actor -> "begin", "write", "read" or "inside"
        self._holding: set[str] = set()  # actors inside a transaction
        self._running: str | None = None
        self.schedule: list[str] = []

    def point(self, actor: str, sql: str, in_transaction: bool) -> None:
        with self._turn:
            kind = self._kind(actor, sql, in_transaction)
            self._waiting[actor] = kind
            self._running = None
            self._pick()
            self._turn.wait_for(lambda: self._running == actor)
            if kind == "begin":
                self._holding.add(actor)

    def finish(self, actor: str) -> None:
        with self._turn:
            self._live.discard(actor)
            self._holding.discard(actor)
            self._running = None
            self._pick()

    def _kind(self, actor: str, sql: str, in_transaction: bool) -> str:
        statement = sql.lstrip().upper()
        if not in_transaction and not statement.startswith("BEGIN"):
            self._holding.discard(actor)  # its transaction ended (commit or rollback)
        if actor in self._holding:
            return "inside"
        if statement.startswith("BEGIN") or in_transaction:
            return "begin"
        if statement.startswith("SELECT") and "FOR UPDATE" not in statement:
            return "read"
        return "write"

    def _pick(self) -> None:
        if self._running is not None or len(self._waiting) < len(self._live):
            return  # someone still runs, or has not reached its first statement yet
        if not self._waiting:
            return
        runnable = sorted(
            actor
            for actor, kind in self._waiting.items()
            if kind in ("read", "inside") or not (self._holding - {actor})
        )
        if not runnable:
            raise Deadlock(f"every actor waits for another: {self._waiting}")
        chosen = self._rng.choice(runnable)
        self.schedule.append(f"{chosen}:{self._waiting.pop(chosen)}")
        self._running = chosen
        self._turn.notify_all()

    def hook(self, actor: str):
        """An execute wrapper (`connection.execute_wrapper`) making each statement a point."""
        from django.db import connection

        def before_each_statement(execute, sql, params, many, context):
            self.point(actor, sql, connection.in_atomic_block)
            return execute(sql, params, many, context)

        return before_each_statement


# --- two processes: seeded pauses around every storage and memory call ----------------------
# Real processes interleave as the operating system runs them; a random pause before and after
# each storage and memory call widens the windows in which they overlap. Not reproducible.
MAX_PAUSE_SEC = 0.002
_pauses = threading.local()


def _maybe_pause() -> None:
    rng = getattr(_pauses, "rng", None)
    if rng is not None and rng.random() < 0.5:
        time.sleep(rng.uniform(0, MAX_PAUSE_SEC))


def _pausing(function):
    def wrapper(*args, **kwargs):
        _maybe_pause()
        try:
            return function(*args, **kwargs)
        finally:
            _maybe_pause()

    return wrapper


def install_pauses() -> None:
    """Wrap the store's methods and memory_app's services (in an actor process)."""
    from memory_app import receivers
    from memory_app import services as memory
    from sessions_app.store import get_store

    store = get_store()
    for name in ("create", "get_meta", "get_messages", "append", "delete"):
        setattr(store, name, _pausing(getattr(store, name)))
    memory.working_memory_remember = _pausing(memory.working_memory_remember)
    receivers.memory_purge_for_session = _pausing(memory.memory_purge_for_session)


def set_lock(no_lock: bool) -> None:
    """The per-session lock switch, which only this script turns off."""
    from sessions_app.services import sessions

    sessions._SESSION_LOCKING = not no_lock


# --- one round ---------------------------------------------------------------------------------
def round_setup(owner_id: int) -> None:
    from memory_app.models import WorkingMemory
    from memory_app.services import memory_purge_for_session, working_memory_remember
    from sessions_app.models import LiveConnection
    from sessions_app.store import NewEntry, get_store

    store = get_store()
    LiveConnection.objects.all().delete()
    memory_purge_for_session(session_id=SESSION)
    store.delete(SESSION)
    WorkingMemory.objects.filter(session_id=SESSION).delete()
    store.create(SESSION, owner_id=owner_id)
    store.append(
        SESSION,
        [
            NewEntry(kind="turn_start", turn_id="t1", data={"model": "offline"}),
            NewEntry(role="user", content="remember that my color is blue", turn_id="t1"),
            NewEntry(role="assistant", content="Noted: your color is blue.", turn_id="t1"),
            NewEntry(kind="turn_end", turn_id="t1", data={"status": "completed"}),
        ],
    )
    working_memory_remember(session_id=SESSION, key="color", value="blue")


def act(role: str, owner_id: int, seed: int, no_lock: bool, scheduler=None) -> dict:
    """One actor's part of a round; with a `scheduler`, each of its statements waits its turn."""
    from django.db import connection

    if scheduler is None:
        return _act(role, owner_id, seed, no_lock)
    try:
        with connection.execute_wrapper(scheduler.hook(role)):
            return _act(role, owner_id, seed, no_lock)
    finally:
        scheduler.finish(role)


def _act(role: str, owner_id: int, seed: int, no_lock: bool) -> dict:
    from django.db import DatabaseError

    from memory_app.services import working_memory_remember
    from sessions_app.runtime.turn.lease import SessionBusy
    from sessions_app.services import connections as connection_services
    from sessions_app.services import deletion
    from sessions_app.store import SessionNotFound, get_store

    try:
        if role == "delete":
            try:
                return {"deleted": deletion.session_delete(session_id=SESSION, owner_id=owner_id)}
            except (deletion.SessionConnected, SessionBusy):
                return {"deleted": False}
        channel = f"tab-{seed}"
        meta, _created = connection_services.connection_open(
            session_id=SESSION, channel_name=channel, user_id=owner_id
        )
        shown = get_store().get_messages(SESSION)
        fence = nullcontext() if no_lock else get_store().fenced(SESSION, meta.incarnation)
        try:
            with fence:
                working_memory_remember(session_id=SESSION, key="opened", value=channel)
        except SessionNotFound:
            pass  # the session went between open and note: nothing is written, rightly
        connection_services.connection_close(channel_name=channel)
        return {"promised": meta.last_seq, "shown": len(shown)}
    except (SessionNotFound, DatabaseError) as error:
        return {"error": type(error).__name__}


def classify(reopened: dict) -> str:
    from memory_app.models import WorkingMemory
    from sessions_app.store import get_store

    store = get_store()
    if reopened.get("promised", 0) > reopened.get("shown", 0):
        return "session without history"
    meta = store.get_meta(SESSION)
    memory = dict(WorkingMemory.objects.filter(session_id=SESSION).values_list("key", "value"))
    if meta is None:
        return "both deleted" if not memory else "inconsistent"
    entries = store.get_messages(SESSION)
    original = meta.last_seq == 4 and len(entries) == 4 and memory.get("color") == "blue"
    fresh = meta.last_seq == 0 and not entries and "color" not in memory
    if original or fresh:
        return "both kept"
    if meta.last_seq > len(entries):
        return "session without history"
    return "inconsistent"


# --- running the rounds --------------------------------------------------------------------------
def actor_process(role, database_url, no_lock, owner_id, seeds, start, done, results):
    setup_django(database_url)
    set_lock(no_lock)
    install_pauses()
    from django.db import connections

    for seed in seeds:
        start.wait()
        _pauses.rng = random.Random(seed)
        results.put((role, act(role, owner_id, seed, no_lock)))
        _pauses.rng = None
        connections.close_all()
        done.wait()


def run(args) -> tuple[dict[str, int], str | None]:
    """The outcome counts, and with threads a digest of every round's schedule."""
    database_url = prepare_database(args.database)
    setup_django(database_url, migrate=True)
    from django.contrib.auth import get_user_model
    from django.db import connections

    owner_id = get_user_model().objects.create_user(username="racer", password="-").id
    set_lock(args.no_lock)
    master = random.Random(args.seed)
    seeds = [(master.randrange(2**31), master.randrange(2**31)) for _ in range(args.rounds)]
    counts = dict.fromkeys(OUTCOMES, 0)
    schedules = hashlib.sha256()
    current: list[Scheduler] = []  # the round's scheduler, set before the actors are released

    if args.processes == 2:
        context = multiprocessing.get_context("spawn")
        start, done, results = context.Barrier(3), context.Barrier(3), context.Queue()
        connections.close_all()
        actors = [
            context.Process(
                target=actor_process,
                args=(role, database_url, args.no_lock, owner_id, column, start, done, results),
            )
            for role, column in (
                ("delete", [pair[0] for pair in seeds]),
                ("reopen", [pair[1] for pair in seeds]),
            )
        ]
        for actor in actors:
            actor.start()
    else:
        start, done, results = threading.Barrier(3), threading.Barrier(3), queue.Queue()

        def actor_thread(role, column):
            for seed in column:
                start.wait()
                results.put((role, act(role, owner_id, seed, args.no_lock, current[0])))
                connections.close_all()
                done.wait()

        actors = [
            threading.Thread(target=actor_thread, args=("delete", [p[0] for p in seeds])),
            threading.Thread(target=actor_thread, args=("reopen", [p[1] for p in seeds])),
        ]
        for actor in actors:
            actor.start()

    for number, (deleter_seed, reopener_seed) in enumerate(seeds):
        round_setup(owner_id)
        if args.processes == 1:
            current[:] = [Scheduler(("delete", "reopen"), seed=deleter_seed ^ reopener_seed)]
        start.wait()
        outcome = dict(results.get(timeout=120) for _ in range(2))
        done.wait()
        counts[classify(outcome["reopen"])] += 1
        if current:
            schedules.update((" ".join(current[0].schedule) + "\n").encode())
        if args.progress and (number + 1) % 500 == 0:
            print(f"  {number + 1}/{args.rounds} rounds", file=sys.stderr)
    for actor in actors:
        actor.join(60)
    return counts, (schedules.hexdigest()[:16] if current else None)


def table(args, counts: dict[str, int]) -> str:
    rounds = sum(counts.values())
    bad = counts["session without history"] + counts["inconsistent"]
    header = "| label | lock | processes | database | rounds | " + " | ".join(OUTCOMES)
    header += " | inconsistent % |"
    row = (
        f"| {args.label} | {'off' if args.no_lock else 'on'} | {args.processes} | "
        f"{args.database} | {rounds} | "
        + " | ".join(str(counts[name]) for name in OUTCOMES)
        + f" | {100 * bad / rounds:.1f}% |"
    )
    return "\n".join([header, "|" + "---|" * (header.count("|") - 1), row])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--label", required=True, help="names the run in the table")
    parser.add_argument("--no-lock", action="store_true", help="turn the per-session lock off")
    parser.add_argument("--rounds", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--processes", type=int, choices=(1, 2), default=1)
    parser.add_argument("--database", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument("--progress", action="store_true", help="report every 500 rounds")
    args = parser.parse_args()
    counts, digest = run(args)
    if digest:
        print(f"schedule digest (the same for the same --seed): {digest}")
    print(table(args, counts))


if __name__ == "__main__":
    main()
