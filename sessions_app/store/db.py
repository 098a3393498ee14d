"""The `db` backend: SQLite or PostgreSQL through Django's connection.

Hot paths (append, load, branch, delete) are SQL through Django's own `connection.cursor()`
with bound parameters: docs/design.md §10 measured the ORM at ~3x the raw driver for a turn's
append and ~2.6x for loading history, while one multi-row INSERT through Django's cursor
costs ~1.4x. Everything else uses the ORM.
"""

from __future__ import annotations

import json
from contextlib import contextmanager, nullcontext
from datetime import datetime
from functools import cached_property

import psycopg
from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.utils import timezone
from psycopg.types.datetime import TimestamptzLoader

from sessions_app.core.ids import new_session_id, validate_session_id
from sessions_app.models import Entry, ProactiveNotice, Session
from sessions_app.store import approvals, connections, db_lease, db_search, usage_ledger
from sessions_app.store.base import (
    ENTRY_SCHEMA_VERSION,
    TITLE_MAX,
    AgentMismatch,
    EntryRecord,
    NewEntry,
    Notice,
    SessionExists,
    SessionMeta,
    SessionNotFound,
    new_incarnation,
    record_from_fields,
)

ENTRY_BODY_COLUMNS = (
    "seq, kind, role, content, tool_calls, tool_call_id, name, is_error, model, usage, "
    "turn_id, data, v"
)
ENTRY_COLUMNS = f"{ENTRY_BODY_COLUMNS}, created_at"
# Rows of one INSERT of entries (15 parameters each): under every backend's parameter limit.
INSERT_BATCH_ROWS = 1000
# How far before a compaction's cut its start is looked for first (get_context_entries).
CUT_LOOKBACK_ENTRIES = 64


def _json_param(value):
    return None if value is None else json.dumps(value, ensure_ascii=False)


def _entry_cells(entry: NewEntry) -> tuple:
    """An entry's own columns, from `kind` to `data`, as the driver binds them."""
    return (
        entry.kind,
        entry.role,
        entry.content,
        _json_param(entry.tool_calls),
        entry.tool_call_id,
        entry.name,
        entry.is_error,
        entry.model,
        _json_param(entry.usage),
        entry.turn_id,
        _json_param(entry.data),
    )


META_FIELDS = (
    "id",
    "agent",
    "owner_id",
    "title",
    "parent_id",
    "branched_at_seq",
    "created_at",
    "updated_at",
    "last_seq",
    "incarnation",
    "model",
    "spawned_by",
    "thinking",
    "pinned",
    "archived",
)


class DbSessionStore:
    """docs/design.md §4 over the ORM models; portable between SQLite and PostgreSQL."""

    @cached_property
    def _tables(self) -> dict[str, str]:
        quote = connection.ops.quote_name
        return {
            "session": quote(Session._meta.db_table),
            "entry": quote(Entry._meta.db_table),
            "notice": quote(ProactiveNotice._meta.db_table),
        }

    # --- conversions --------------------------------------------------------------------
    @staticmethod
    def _db_datetime(value: datetime):
        return connection.ops.adapt_datetimefield_value(value)

    @cached_property
    def _created_at_text(self) -> str:
        """`created_at` as ISO 8601 text with its UTC offset, parsed in Python.

        Loading history is the hottest read. Django's PostgreSQL timestamptz loader parses
        in Python row by row and its SQLite converter needs a tz attached afterwards; text
        that `datetime.fromisoformat` reads directly is ~5x cheaper, and the entries of one
        turn share a timestamp, so each distinct text is parsed once per load.
        """
        return self._iso_text("created_at")

    @staticmethod
    def _iso_text(column: str) -> str:
        """SQL reading a timestamp column as ISO 8601 text with its UTC offset."""
        if connection.vendor == "postgresql":
            # to_char, not a cast: the output must not depend on the server's DateStyle.
            return f"to_char({column} AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"+00:00\"')"
        # SQLite keeps naive UTC text (Django's format).
        return f"{column} || '+00:00'"

    @staticmethod
    def _records(session_id: str, rows) -> list[EntryRecord]:
        loads = json.loads
        parse = datetime.fromisoformat
        stamps: dict[str, datetime] = {}
        records = []
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
        ) in rows:
            stamp = stamps.get(created_at)
            if stamp is None:
                stamp = stamps[created_at] = parse(created_at)
            # JSON columns arrive as text on both databases (Django registers a text loader
            # for jsonb on PostgreSQL).
            records.append(
                record_from_fields(
                    {
                        "session_id": session_id,
                        "seq": seq,
                        "kind": kind,
                        "role": role,
                        "content": content,
                        "tool_calls": loads(tool_calls)
                        if isinstance(tool_calls, str)
                        else tool_calls,
                        "tool_call_id": tool_call_id,
                        "name": name,
                        "is_error": bool(is_error),
                        "model": model,
                        "usage": loads(usage) if isinstance(usage, str) else usage,
                        "turn_id": turn_id,
                        "data": loads(data) if isinstance(data, str) else data,
                        "created_at": stamp,
                        "v": version,
                    }
                )
            )
        return records

    # --- sessions -----------------------------------------------------------------------
    def create(self, session_id, agent="jarvis", owner_id=None, title="", spawned_by=None):
        validate_session_id(session_id)
        existing = self.get_meta(session_id)
        if existing is None:
            now = timezone.now()
            # ON CONFLICT DO NOTHING: concurrent creators of one id all end with the same row.
            Session.objects.bulk_create(
                [
                    Session(
                        id=session_id,
                        agent=agent,
                        owner_id=owner_id,
                        title=title,
                        spawned_by=spawned_by,
                        created_at=now,
                        updated_at=now,
                        incarnation=new_incarnation(),
                    )
                ],
                ignore_conflicts=True,
            )
            existing = self.get_meta(session_id)
        if existing.agent != agent:
            raise AgentMismatch(session_id, existing.agent, agent)
        return existing

    def set_title(self, session_id, title, incarnation=None):
        # Plain SQL: every conversation's first turn names it, and building the ORM's update
        # cost more than running it. Like the ORM's `update`, it leaves `updated_at` alone.
        # The session as updated comes back with it: one round trip, not an update and a read.
        validate_session_id(session_id)
        sql = f"UPDATE {self._tables['session']} SET title = %s WHERE id = %s"
        params = [title[:TITLE_MAX], session_id]
        if incarnation is not None:
            sql += " AND incarnation = %s"
            params.append(incarnation)
        found = self._metas_of(f"{sql} RETURNING {self._meta_columns}", params)
        if not found:
            raise SessionNotFound(session_id)
        return found[0]

    @staticmethod
    def _rows(session_id, incarnation=None):
        rows = Session.objects.filter(id=session_id)
        return rows if incarnation is None else rows.filter(incarnation=incarnation)

    @contextmanager
    def fenced(self, session_id, incarnation=None):
        """A transaction in which the session (as of `incarnation`, if given) exists and stays.

        The row lock makes a concurrent delete wait for the block (PostgreSQL); on SQLite the
        IMMEDIATE transaction serializes the two the same way.
        """
        validate_session_id(session_id)
        with transaction.atomic():
            if not self._rows(session_id, incarnation).select_for_update().exists():
                raise SessionNotFound(session_id)
            yield

    @contextmanager
    def locked(self, session_id, *, agent="jarvis", owner_id=None):
        """A transaction holding the session row's lock; yields whether there is a row.

        A missing session has no row and nothing to lock: whoever creates it first owns it
        (`create` ignores conflicts). On SQLite `select_for_update` does nothing, but every
        transaction is IMMEDIATE (settings), so lockers serialize on the write lock instead.
        """
        validate_session_id(session_id)
        with transaction.atomic():
            yield bool(
                list(Session.objects.select_for_update().filter(id=session_id).values_list("id"))
            )

    def set_model(self, session_id, model):
        validate_session_id(session_id)
        if not Session.objects.filter(id=session_id).update(model=model):
            raise SessionNotFound(session_id)
        return self.get_meta(session_id)

    def set_thinking(self, session_id, thinking):
        validate_session_id(session_id)
        if not Session.objects.filter(id=session_id).update(thinking=thinking):
            raise SessionNotFound(session_id)
        return self.get_meta(session_id)

    def set_flags(self, session_id, *, pinned=None, archived=None):
        validate_session_id(session_id)
        changes = {
            name: bool(value)
            for name, value in (("pinned", pinned), ("archived", archived))
            if value is not None
        }
        rows = Session.objects.filter(id=session_id)
        if not (rows.update(**changes) if changes else rows.exists()):
            raise SessionNotFound(session_id)
        return self.get_meta(session_id)

    def get_meta(self, session_id):
        # Read several times by every turn: the same plain SQL as the list.
        validate_session_id(session_id)
        found = self._metas(" WHERE id = %s", [session_id])
        return found[0] if found else None

    def list(
        self, owner_id=None, agent=None, include_tests=True, include_subagents=True, archived=None
    ):
        """Sessions newest activity first, as SessionMeta; reads only session rows.

        SQL through Django's connection, like the hot paths: the sessions list is what the
        web page reads first, and `values_list` with Django's per-row timestamp converters
        cost 1.9x (SQLite) to 3.7x (PostgreSQL) the raw driver for 1,000 sessions. On
        PostgreSQL the cursor gets psycopg's own timestamptz loader back (Django's
        replacement parses in Python, ~4x slower); SQLite's naive UTC text is read as ISO
        text, like history's. Records are built without the frozen dataclass's per-field
        __init__.
        """
        conditions: list[str] = []
        params: list = []
        if not include_subagents:
            conditions.append("spawned_by IS NULL")
        if owner_id is not None:
            conditions.append("owner_id = %s")
            params.append(owner_id)
        if agent is not None:
            conditions.append("agent = %s")
            params.append(agent)
        if archived is not None:
            conditions.append("archived = %s")
            params.append(bool(archived))
        if not include_tests:
            # A plain prefix comparison, case-sensitive on both databases (SQLite's LIKE is
            # not), as the jsonl backend's str.startswith.
            for prefix in settings.TEST_SESSION_PREFIXES:
                conditions.append("substr(id, 1, %s) <> %s")
                params.extend((len(prefix), prefix))
        where = f" WHERE {' AND '.join(conditions)}" if conditions else ""
        return self._metas(where, params)

    def _metas(self, where: str, params: list) -> list[SessionMeta]:
        sql = (
            f"SELECT {self._meta_columns} FROM {self._tables['session']}{where} "
            "ORDER BY updated_at DESC, id DESC"
        )
        return self._metas_of(sql, params)

    @property
    def _meta_columns(self) -> str:
        stamps = (
            "created_at, updated_at"
            if connection.vendor == "postgresql"
            else f"{self._iso_text('created_at')}, {self._iso_text('updated_at')}"
        )
        return (
            f"id, agent, owner_id, title, parent_id, branched_at_seq, {stamps}, "
            "last_seq, incarnation, model, spawned_by, thinking, pinned, archived"
        )

    @staticmethod
    def _metas_of(sql: str, params: list) -> list[SessionMeta]:
        """The sessions of a statement that yields `_meta_columns` (a SELECT, or a write's
        RETURNING)."""
        postgresql = connection.vendor == "postgresql"
        with connection.cursor() as cursor:
            if postgresql:
                # On this cursor only (the wrapper's driver cursor): psycopg's own loader.
                cursor.cursor.adapters.register_loader("timestamptz", TimestamptzLoader)
            cursor.execute(sql, params)
            rows = cursor.fetchall()
        parse = _as_is if postgresql else datetime.fromisoformat
        return [
            _meta_from_fields(
                {
                    "id": session_id,
                    "agent": agent_name,
                    "owner_id": owner,
                    "title": title,
                    "parent_id": parent_id,
                    "branched_at_seq": branched_at_seq,
                    "created_at": parse(created_at),
                    "updated_at": parse(updated_at),
                    "last_seq": last_seq,
                    "incarnation": incarnation,
                    "model": model,
                    "spawned_by": spawned_by,
                    "thinking": thinking,
                    "pinned": bool(pinned),
                    "archived": bool(archived),
                }
            )
            for (
                session_id,
                agent_name,
                owner,
                title,
                parent_id,
                branched_at_seq,
                created_at,
                updated_at,
                last_seq,
                incarnation,
                model,
                spawned_by,
                thinking,
                pinned,
                archived,
            ) in rows
        ]

    # --- entries ------------------------------------------------------------------------
    def get_messages(self, session_id, after_seq=0, limit=None):
        validate_session_id(session_id)
        sql = (
            f"SELECT {ENTRY_BODY_COLUMNS}, {self._created_at_text} FROM {self._tables['entry']} "
            "WHERE session_id = %s AND seq > %s ORDER BY seq"
        )
        params: list = [session_id, int(after_seq)]
        if limit is not None:
            sql += " LIMIT %s"
            params.append(int(limit))
        with connection.cursor() as cursor:
            cursor.execute(sql, params)
            rows = cursor.fetchall()
        return self._records(session_id, rows)

    def get_context_entries(self, session_id):
        """From the latest compaction's `first_kept_seq` on. Every turn's start reads this:
        one statement reads from the newest compaction on (found in the index of the
        compactions alone, `entry_compaction_seq`), which is all of a history never
        compacted; only a compaction that keeps earlier entries costs one or two more reads."""
        validate_session_id(session_id)
        entry = self._tables["entry"]
        with connection.cursor() as cursor:
            cursor.execute(
                f"SELECT {ENTRY_BODY_COLUMNS}, {self._created_at_text} FROM {entry} "
                "WHERE session_id = %s AND seq >= COALESCE(("
                f"SELECT seq FROM {entry} WHERE session_id = %s AND kind = 'compaction' "
                "ORDER BY seq DESC LIMIT 1), 0) ORDER BY seq",
                [session_id, session_id],
            )
            records = self._records(session_id, cursor.fetchall())
        if not records or records[0].kind != "compaction":
            return records
        compaction = records[0]
        first_kept = min(int((compaction.data or {}).get("first_kept_seq") or 0), compaction.seq)
        with connection.cursor() as cursor:
            # A cut that falls on tool results is moved back by the projection to the call
            # they answer (history.py): the read starts at the last message that is not one.
            # It is looked for among the few entries before the cut first: an open-ended
            # walk's plan depends on the table's statistics, and a session grown since the
            # last ANALYZE was then read whole (docs/performance.md).
            row = None
            for lowest in (first_kept - CUT_LOOKBACK_ENTRIES, -1):
                cursor.execute(
                    f"SELECT seq FROM {entry} WHERE session_id = %s AND seq <= %s "
                    "AND seq > %s AND kind = 'message' AND role <> 'tool' "
                    "ORDER BY seq DESC LIMIT 1",
                    [session_id, first_kept, lowest],
                )
                row = cursor.fetchone()
                if row is not None or lowest < 0:
                    break
            start = row[0] if row is not None else 1
            if start >= compaction.seq:
                return records
            cursor.execute(
                f"SELECT {ENTRY_BODY_COLUMNS}, {self._created_at_text} FROM {entry} "
                "WHERE session_id = %s AND seq >= %s AND seq < %s ORDER BY seq",
                [session_id, start, compaction.seq],
            )
            return self._records(session_id, cursor.fetchall()) + records

    def append(self, session_id, entries, incarnation=None):
        validate_session_id(session_id)
        entries = list(entries)
        if not entries:
            return []
        now = timezone.now()
        created = self._db_datetime(now)
        if connection.vendor == "postgresql" and len(entries) <= INSERT_BATCH_ROWS:
            first_seq = self._append_in_one_statement(session_id, entries, incarnation, created)
            return self._appended(session_id, first_seq, entries, now)
        # Inside a caller's transaction (a turn's start, its closing) the append is part of
        # it, with no savepoint: a savepoint is two more round trips, each of which waits
        # for the interpreter lock on a busy worker (docs/performance.md). A missing session
        # is raised after the block, so that the caller's transaction stays usable; a
        # database error breaks it (on PostgreSQL it would anyway, savepoint aside).
        missing = False
        with transaction.atomic(savepoint=False):
            cursor, mark = self._append_cursor()
            try:
                # One UPDATE both reserves the seqs and takes the session row lock on
                # PostgreSQL, so concurrent appenders to one session queue here, across
                # processes. On SQLite the IMMEDIATE transaction serializes writers and the
                # unique (session, seq) constraint is the last guard.
                # The incarnation is checked in the same statement: a turn's writes never
                # reach a session created again under its id.
                fence = "" if incarnation is None else f" AND incarnation = {mark}"
                cursor.execute(
                    f"UPDATE {self._tables['session']} SET last_seq = last_seq + {mark}, "
                    f"updated_at = {mark} WHERE id = {mark}{fence} RETURNING last_seq",
                    [len(entries), created, session_id]
                    + ([] if incarnation is None else [incarnation]),
                )
                row = cursor.fetchone()
                if row is None:
                    missing = True
                else:
                    first_seq = row[0] - len(entries) + 1
                    self._insert_entries(cursor, mark, session_id, first_seq, entries, created)
            finally:
                cursor.close()
        if missing:
            raise SessionNotFound(session_id)
        return self._appended(session_id, first_seq, entries, now)

    @staticmethod
    def _appended(session_id, first_seq, entries, now) -> list[EntryRecord]:
        return [
            record_from_fields(
                {
                    "session_id": session_id,
                    "seq": first_seq + offset,
                    **_entry_fields(entry),
                    "created_at": now,
                    "v": ENTRY_SCHEMA_VERSION,
                }
            )
            for offset, entry in enumerate(entries)
        ]

    def _append_in_one_statement(self, session_id, entries, incarnation, created) -> int:
        """PostgreSQL: the seqs reserved and the rows inserted by one statement (a
        data-modifying CTE); returns the first seq. Outside a transaction it commits on its
        own: one round trip where BEGIN, UPDATE, INSERT, COMMIT were four, each of which
        waits for the interpreter lock on a busy worker (docs/performance.md).

        The UPDATE takes the session row's lock before the INSERT runs, so concurrent
        appenders queue on it as they do in two statements; a missing session (or another
        incarnation) reserves nothing and inserts nothing."""
        fence = "" if incarnation is None else " AND incarnation = %s"
        count = len(entries)
        params: list = [count, created, session_id] + ([] if incarnation is None else [incarnation])
        params += [session_id, count, ENTRY_SCHEMA_VERSION, created]
        for offset, entry in enumerate(entries, start=1):
            params.append(offset)
            params.extend(_entry_cells(entry))
        # Typed cells: VALUES would read an unknown-typed parameter as text, and text does
        # not go into a jsonb column.
        row_marks = (
            "(%s::integer, %s, %s, %s, %s::jsonb, %s, %s, %s::boolean, %s, %s::jsonb, %s, "
            "%s::jsonb)"
        )
        sql = (
            f"WITH reserved AS (UPDATE {self._tables['session']} "
            "SET last_seq = last_seq + %s, updated_at = %s "
            f"WHERE id = %s{fence} RETURNING last_seq) "
            f"INSERT INTO {self._tables['entry']} (session_id, {ENTRY_COLUMNS}) "
            "SELECT %s, reserved.last_seq - %s + new.o, new.kind, new.role, new.content, "
            "new.tool_calls, new.tool_call_id, new.name, new.is_error, new.model, new.usage, "
            "new.turn_id, new.data, %s, %s "
            f"FROM reserved CROSS JOIN (VALUES {', '.join([row_marks] * count)}) AS new "
            "(o, kind, role, content, tool_calls, tool_call_id, name, is_error, model, usage, "
            "turn_id, data) RETURNING seq"
        )
        cursor, _ = self._append_cursor()
        try:
            # In a caller's transaction the statement is part of it; an error marks it for
            # rollback as the two-statement append's block does.
            with (
                transaction.atomic(savepoint=False) if connection.in_atomic_block else nullcontext()
            ):
                cursor.execute(sql, params)
                seqs = [row[0] for row in cursor.fetchall()]
        finally:
            cursor.close()
        if not seqs:
            raise SessionNotFound(session_id)
        return min(seqs)

    @staticmethod
    def _append_cursor():
        """A driver cursor on Django's own connection (so: its transaction), and its mark.

        Django's cursor wrappers cost a fifth of an append (docs/performance.md): on SQLite
        a regex rewrites every "%s" to "?" per call, on PostgreSQL a client-side-binding
        cursor quotes all 56 parameters into the SQL text. The driver cursor binds them
        server-side and lets psycopg prepare the statement after a few runs.
        """
        connection.ensure_connection()
        if connection.vendor == "sqlite":
            return connection.connection.cursor(), "?"

        return psycopg.Cursor(connection.connection), "%s"

    def _insert_entries(self, cursor, mark, session_id, first_seq, entries, created):
        params: list = []
        rows = 0
        for offset, entry in enumerate(entries):
            rows += 1
            params.extend((session_id, first_seq + offset))
            params.extend(_entry_cells(entry))
            params.extend((ENTRY_SCHEMA_VERSION, created))
        # One statement per INSERT_BATCH_ROWS rows: PostgreSQL binds at most 65,535
        # parameters a statement (4,369 rows of 15), SQLite builds often fewer.
        row_marks = "(" + ", ".join([mark] * 15) + ")"
        for start in range(0, rows, INSERT_BATCH_ROWS):
            batch = min(INSERT_BATCH_ROWS, rows - start)
            cursor.execute(
                f"INSERT INTO {self._tables['entry']} (session_id, {ENTRY_COLUMNS}) "
                f"VALUES {', '.join([row_marks] * batch)}",
                params[start * 15 : (start + batch) * 15],
            )

    def get_turn_tail(self, session_id, up_to_seq):
        """The entries of the last turn (or exchange) up to `up_to_seq`: all a repair reads.

        One backwards walk of the (session, seq) index to the nearest turn marker or user
        message, stopping at the first match. The runtime stores a turn's user message right
        after its `turn_start`, so reading from one entry before the match covers the turn's
        start too; histories without turn markers still end each exchange at a user message,
        after which only the latest assistant's calls can still be waiting for results.
        """
        validate_session_id(session_id)
        if up_to_seq is None:
            up_to_seq = self._last_stored_seq(session_id)
        up_to_seq = int(up_to_seq)
        if up_to_seq <= 0:
            return []
        with connection.cursor() as cursor:
            cursor.execute(
                f"SELECT seq FROM {self._tables['entry']} WHERE session_id = %s AND seq <= %s "
                "AND (kind IN ('turn_start', 'turn_end') OR role = 'user') "
                "ORDER BY seq DESC LIMIT 1",
                [session_id, up_to_seq],
            )
            row = cursor.fetchone()
        after = max((row[0] if row is not None else 1) - 2, 0)
        return self.get_messages(session_id, after_seq=after, limit=up_to_seq - after)

    def _last_stored_seq(self, session_id: str) -> int:
        with connection.cursor() as cursor:
            cursor.execute(
                f"SELECT MAX(seq) FROM {self._tables['entry']} WHERE session_id = %s",
                [session_id],
            )
            row = cursor.fetchone()
        return row[0] or 0

    # --- delete -------------------------------------------------------------------------
    def delete(self, session_id):
        """Remove the session and all it has: entries, notices, connection rows, approval
        requests, model usage rows. Its branches stay, without a parent."""
        validate_session_id(session_id)
        tables = self._tables
        with transaction.atomic(), connection.cursor() as cursor:
            # Children first, in plain DELETEs: the ORM collector would load every entry.
            cursor.execute(f"DELETE FROM {tables['entry']} WHERE session_id = %s", [session_id])
            cursor.execute(f"DELETE FROM {tables['notice']} WHERE session_id = %s", [session_id])
            connections.remove_for_session(session_id)
            approvals.remove_for_session(session_id)
            usage_ledger.remove_for_session(session_id)
            # Branches outlive their parent (parent is SET_NULL).
            cursor.execute(
                f"UPDATE {tables['session']} SET parent_id = NULL WHERE parent_id = %s",
                [session_id],
            )
            cursor.execute(f"DELETE FROM {tables['session']} WHERE id = %s", [session_id])
            return cursor.rowcount > 0

    # --- branch -------------------------------------------------------------------------
    def create_branch(
        self, source_id, new_id=None, at_seq=None, owner_id=None, closing=(), incarnation=None
    ):
        """Copy a session up to `at_seq` into a new, independent session.

        Steps, in one transaction: check the source (as of `incarnation`, if given) and the
        cut; insert the new session row; copy the entries server-side in one INSERT … SELECT
        (same seqs); append `closing` after them.
        """
        validate_session_id(source_id)
        new_id = validate_session_id(new_id) if new_id is not None else new_session_id()
        source = self.get_meta(source_id)
        if source is None or (incarnation is not None and source.incarnation != incarnation):
            raise SessionNotFound(source_id)
        cut = source.last_seq if at_seq is None else int(at_seq)
        if not 0 <= cut <= source.last_seq:
            raise ValueError(f"at_seq must be between 0 and {source.last_seq}, not {at_seq!r}")
        now = timezone.now()
        tables = self._tables
        with transaction.atomic():
            try:
                with transaction.atomic():
                    Session.objects.create(
                        id=new_id,
                        agent=source.agent,
                        owner_id=source.owner_id if owner_id is None else owner_id,
                        title=source.title,
                        parent_id=source_id,
                        branched_at_seq=cut,
                        model=source.model,
                        thinking=source.thinking,
                        created_at=now,
                        updated_at=now,
                        last_seq=cut,
                        incarnation=new_incarnation(),
                    )
            except IntegrityError as error:
                raise SessionExists(f"session {new_id!r} already exists") from error
            with connection.cursor() as cursor:
                cursor.execute(
                    f"INSERT INTO {tables['entry']} (session_id, {ENTRY_COLUMNS}) "
                    f"SELECT %s, {ENTRY_COLUMNS} FROM {tables['entry']} "
                    "WHERE session_id = %s AND seq <= %s",
                    [new_id, source_id, cut],
                )
            if closing:
                self.append(new_id, closing)
        return self.get_meta(new_id)

    # --- turn lease ---------------------------------------------------------------------
    def turn_lease(self, session_id, owner_id=None):
        return db_lease.DbTurnLease(
            validate_session_id(session_id),
            owner_id,
            metas_returned=lambda sql, params: self._metas_of(
                f"{sql} RETURNING {self._meta_columns}", params
            ),
        )

    def request_turn_abort(self, session_id):
        return db_lease.request_abort(validate_session_id(session_id))

    # --- proactive notices --------------------------------------------------------------
    def append_proactive(self, session_id, message_id, content, incarnation=None):
        validate_session_id(session_id)
        with self.fenced(session_id, incarnation):
            row, created = ProactiveNotice.objects.get_or_create(
                session_id=session_id,
                message_id=message_id,
                defaults={"content": content, "created_at": timezone.now()},
            )
        return _notice(row), created

    def get_proactive(self, session_id):
        validate_session_id(session_id)
        return [_notice(row) for row in ProactiveNotice.objects.filter(session_id=session_id)]

    def get_proactive_owned(self, sessions):
        found: dict[str, list[Notice]] = {}
        ids = list(sessions)
        # Chunked: SQLite limits the variables of one statement.
        for start in range(0, len(ids), NOTICE_IDS_PER_QUERY):
            rows = ProactiveNotice.objects.filter(
                session_id__in=ids[start : start + NOTICE_IDS_PER_QUERY]
            ).values_list(*_NOTICE_FIELDS, "session__owner_id")
            for *fields, owner_id in rows:
                notice = Notice(*fields)
                if sessions[notice.session_id] == owner_id:
                    found.setdefault(notice.session_id, []).append(notice)
        return found

    def mark_proactive_delivered(self, session_id, message_id, delivered_at):
        validate_session_id(session_id)
        notices = ProactiveNotice.objects.filter(session_id=session_id, message_id=message_id)
        # Conditional update: two deliveries racing keep the first time.
        notices.filter(delivered_at__isnull=True).update(delivered_at=delivered_at)
        row = notices.first()
        return _notice(row) if row is not None else None

    # --- search -------------------------------------------------------------------------
    def search(self, owner_id, query, limit=20, offset=0):
        # The index is the database's own (migration 0005_search_index): append, branch
        # and delete keep it current without a line of code here.
        return db_search.search(self._tables, owner_id, query, int(limit), int(offset))


def _entry_fields(entry: NewEntry) -> dict:
    return {
        "kind": entry.kind,
        "role": entry.role,
        "content": entry.content,
        "tool_calls": entry.tool_calls,
        "tool_call_id": entry.tool_call_id,
        "name": entry.name,
        "is_error": entry.is_error,
        "model": entry.model,
        "usage": entry.usage,
        "turn_id": entry.turn_id,
        "data": entry.data,
    }


_new_object = object.__new__
_set_attribute = object.__setattr__


def _as_is(value):
    return value


def _meta_from_fields(fields: dict) -> SessionMeta:
    """A SessionMeta from a dict of exactly its fields, set at once (see record_from_fields)."""
    meta = _new_object(SessionMeta)
    _set_attribute(meta, "__dict__", fields)
    return meta


NOTICE_IDS_PER_QUERY = 500
# Notice's fields, in its order, as ProactiveNotice columns.
_NOTICE_FIELDS = ("session_id", "message_id", "content", "created_at", "delivered_at")


def _notice(row: ProactiveNotice) -> Notice:
    return Notice(
        session_id=row.session_id,
        message_id=row.message_id,
        content=row.content,
        created_at=row.created_at,
        delivered_at=row.delivered_at,
    )
