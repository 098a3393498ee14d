"""The jsonl backend's search index: an FTS5 database next to the session files.

`<SESSIONS_DIR>/search.sqlite3` (and SQLite's `-wal`/`-shm` beside it). No session's file
can have that name: every one ends in `.jsonl`, `.json`, `.lock`, `.branches` or `.tmp`.
It is derived data: the jsonl files stay the truth, and the index can always be rebuilt
from them. The store writes it while holding the session's lock:
- append: adds the batch's searchable messages and records the session's `indexed_seq`;
  if that lags behind the batch (an index write that failed, a crash between the two
  writes), the missing entries are read back from the file first, so the index heals on
  the session's next append;
- delete: removes the session's rows *before* its files go, so a crash in between can
  leave a conversation missing from results, never a deleted one found;
- branch: copies the source's rows up to the cut, inside the index.
An index that does not exist yet (a new directory, or sessions written before search
existed) is built from every session file on first use.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from collections.abc import Callable, Iterable
from datetime import datetime
from pathlib import Path

from sessions_app.store.base import EntryRecord, StoreError
from sessions_app.store.search import (
    SEARCHED_ROLES,
    SearchHit,
    fts5_query,
    fts5_table_sql,
    fts5_window_snippet,
    has_wanted_term,
    snippet_parts,
)

logger = logging.getLogger(__name__)

INDEX_FILE = "search.sqlite3"
SCHEMA_VERSION = 1
BUSY_TIMEOUT_MS = 30_000  # writers of every process queue on SQLite's lock
SCHEMA = [
    "CREATE TABLE session (id TEXT PRIMARY KEY, owner_id INTEGER, "
    "indexed_seq INTEGER NOT NULL) WITHOUT ROWID",
    "CREATE TABLE entry (id INTEGER PRIMARY KEY, session_id TEXT NOT NULL, "
    "seq INTEGER NOT NULL, role TEXT NOT NULL, created_at TEXT NOT NULL, "
    "content TEXT NOT NULL, UNIQUE (session_id, seq))",
    fts5_table_sql(fts_table="entry_search", entry_table="entry"),
    # Only searchable messages are stored in `entry`, so the triggers need no condition.
    "CREATE TRIGGER entry_search_insert AFTER INSERT ON entry BEGIN "
    "INSERT INTO entry_search (rowid, content) VALUES (new.id, new.content); END",
    "CREATE TRIGGER entry_search_delete AFTER DELETE ON entry BEGIN "
    "INSERT INTO entry_search (entry_search, rowid, content) "
    "VALUES ('delete', old.id, old.content); END",
]


def is_searchable(record: EntryRecord) -> bool:
    return record.kind == "message" and record.role in SEARCHED_ROLES and bool(record.content)


class JsonlSearchIndex:
    """One SQLite connection per thread; every write is one IMMEDIATE transaction."""

    def __init__(
        self,
        root: Path,
        *,
        read_entries: Callable[[str, int], list[EntryRecord]],
        all_sessions: Callable[[], Iterable[tuple[str, int | None]]],
    ):
        self.path = root / INDEX_FILE
        self._read_entries = read_entries  # (session_id, after_seq) -> records
        self._all_sessions = all_sessions  # (session_id, owner_id) of every session
        self._local = threading.local()

    # --- connection -----------------------------------------------------------------------
    @property
    def _db(self) -> sqlite3.Connection:
        db = getattr(self._local, "db", None)
        if db is None:
            db = sqlite3.connect(self.path, isolation_level=None, timeout=BUSY_TIMEOUT_MS / 1000)
            # Derived data: losing the last transactions to a power cut costs nothing that
            # the next append's catch-up does not restore, so commits need no fsync.
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            self._ensure_schema(db)
            self._local.db = db
        return db

    def _ensure_schema(self, db: sqlite3.Connection) -> None:
        if db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION:
            return
        db.execute("BEGIN IMMEDIATE")
        try:
            # Another process may have built it while this one waited for the lock.
            if db.execute("PRAGMA user_version").fetchone()[0] != SCHEMA_VERSION:
                for statement in SCHEMA:
                    db.execute(statement)
                for session_id, owner_id in self._all_sessions():
                    try:
                        self._catch_up(db, session_id, owner_id, 0)
                    except StoreError:
                        # A damaged file stays unindexed (its next append tries again);
                        # it must not keep every other session out of the index.
                        logger.exception("search index: %s not indexed", session_id)
                db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise

    def _write(self, work: Callable[[sqlite3.Connection], None]) -> None:
        db = self._db
        db.execute("BEGIN IMMEDIATE")
        try:
            work(db)
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise

    # --- writes (the caller holds the session's lock) -------------------------------------
    def add(self, session_id: str, records: list[EntryRecord], owner_id: Callable[[], int]):
        """Index an appended batch; a failure is logged, not raised: the entries are
        already durable, and the next append of this session catches the index up."""
        try:
            self._write(lambda db: self._add(db, session_id, records, owner_id))
        except (sqlite3.Error, StoreError):  # StoreError: a damaged file met by the catch-up
            logger.exception("search index: %s seq %d not indexed yet", session_id, records[0].seq)

    def _add(self, db, session_id, records, owner_id) -> None:
        row = db.execute(
            "SELECT owner_id, indexed_seq FROM session WHERE id = ?", (session_id,)
        ).fetchone()
        owner, indexed_seq = (owner_id(), 0) if row is None else row
        if indexed_seq < records[0].seq - 1:
            indexed_seq = self._catch_up(db, session_id, owner, indexed_seq, records[0].seq - 1)
        fresh = [record for record in records if record.seq > indexed_seq]
        self._insert(db, session_id, fresh)
        self._set_indexed(db, session_id, owner, max(indexed_seq, records[-1].seq))

    def _catch_up(self, db, session_id, owner, after_seq, up_to_seq=None) -> int:
        """Index the entries of the session file after `after_seq` (up to `up_to_seq`)."""
        records = [
            record
            for record in self._read_entries(session_id, after_seq)
            if up_to_seq is None or record.seq <= up_to_seq
        ]
        self._insert(db, session_id, records)
        indexed_seq = records[-1].seq if records else after_seq
        self._set_indexed(db, session_id, owner, indexed_seq)
        return indexed_seq

    @staticmethod
    def _insert(db, session_id, records: list[EntryRecord]) -> None:
        db.executemany(
            "INSERT INTO entry (session_id, seq, role, created_at, content) VALUES (?, ?, ?, ?, ?)",
            [
                (session_id, r.seq, r.role, r.created_at.isoformat(), r.content)
                for r in records
                if is_searchable(r)
            ],
        )

    @staticmethod
    def _set_indexed(db, session_id, owner, indexed_seq) -> None:
        db.execute(
            "INSERT INTO session (id, owner_id, indexed_seq) VALUES (?, ?, ?) "
            "ON CONFLICT (id) DO UPDATE SET indexed_seq = excluded.indexed_seq",
            (session_id, owner, indexed_seq),
        )

    def remove(self, session_id: str) -> None:
        """Forget a session; raises on failure, so its files are not deleted either."""

        def work(db):
            db.execute("DELETE FROM entry WHERE session_id = ?", (session_id,))
            db.execute("DELETE FROM session WHERE id = ?", (session_id,))

        self._write(work)

    def copy(self, source_id: str, new_id: str, cut: int, owner_id: int | None) -> None:
        """Index a branch: the source's rows up to the cut, copied inside the index."""

        def work(db):
            row = db.execute(
                "SELECT indexed_seq FROM session WHERE id = ?", (source_id,)
            ).fetchone()
            indexed_seq = min(row[0] if row else 0, cut)
            db.execute(
                "INSERT INTO entry (session_id, seq, role, created_at, content) "
                "SELECT ?, seq, role, created_at, content FROM entry "
                "WHERE session_id = ? AND seq <= ?",
                (new_id, source_id, indexed_seq),
            )
            self._set_indexed(db, new_id, owner_id, indexed_seq)

        try:
            self._write(work)
        except sqlite3.Error:
            logger.exception("search index: branch %s not indexed yet", new_id)

    # --- search ---------------------------------------------------------------------------
    def search(self, owner_id: int, query: str, limit: int, offset: int):
        """Hits without titles, best first: (session_id, seq, role, created_at, rank, parts)."""
        match = fts5_query(query) if has_wanted_term(query) else None
        if match is None:
            return []
        db = self._db
        rows = db.execute(
            """
            SELECT e.id, e.session_id, e.seq, e.role, e.created_at, -found.score
            FROM (SELECT rowid AS id, bm25(entry_search) AS score FROM entry_search
                WHERE entry_search MATCH ?) AS found
            JOIN entry e ON e.id = found.id
            JOIN session s ON s.id = e.session_id
            WHERE s.owner_id = ?
            ORDER BY found.score, e.created_at DESC, e.session_id, e.seq DESC
            LIMIT ? OFFSET ?
            """,
            (match, owner_id, limit, offset),
        ).fetchall()
        if not rows:
            return []
        # Read apart from the ranking, so the sort never carries the texts of all matches.
        marks = ", ".join(["?"] * len(rows))
        texts = dict(
            db.execute(
                f"SELECT id, content FROM entry WHERE id IN ({marks})", [row[0] for row in rows]
            ).fetchall()
        )
        return [
            (
                session_id,
                seq,
                role,
                datetime.fromisoformat(created_at),
                rank,
                fts5_window_snippet(texts[rowid], query, match),
            )
            for rowid, session_id, seq, role, created_at, rank in rows
        ]


def search_hit(row, title: str) -> SearchHit:
    session_id, seq, role, created_at, rank, marked = row
    return SearchHit(
        session_id=session_id,
        title=title,
        seq=seq,
        role=role,
        created_at=created_at,
        rank=float(rank),
        snippet=snippet_parts(marked),
    )
