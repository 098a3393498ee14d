"""The `jsonl` backend: one directory of plain files, readable with any text tool.

Per session:
- `<id>.jsonl`: one entry per line, with its seq — the source of truth;
- `<id>.meta.json`: what `get_meta` and `list` read. Its first line is the session's meta as
  one JSON object; each append adds a line `{"last_seq": …, "updated_at": …}` and the last
  complete line wins. Appending a line costs a fraction of replacing the file (a rename
  made every append ~1.5x slower, see docs/performance.md), and a torn update line is
  ignored exactly like a torn entry line. Past META_COMPACT_BYTES the file is rewritten as
  one line (write a temporary file, rename over);
- `<id>.proactive.jsonl` (notices) and `<id>.lock` (an flock that serializes writers across
  threads and processes);
- `<id>.branches`: the ids of sessions branched from this one, one per line, so that a
  delete can clear their `parent_id` (as the db backend's SET_NULL does) without reading
  every meta file in the directory.
The directory also holds the search index, `search.sqlite3` (jsonl_search.py), which
append, branch and delete keep current while they hold the session's lock, and the turn
leases' lock files (file_lease.py).

What every worker must see lives in the database on this backend too: the connection
registry (connections.py), approval requests (approvals.py), and, for each session that
`locked` has locked, an anchor row in the `Session` table — the row that lock is held on and
that connection rows point at. `delete` removes all three.

Session ids never contain '/' and never start with '.', so no id can name a file outside
the directory (sessions_app.core.ids).
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
from contextlib import contextmanager
from dataclasses import asdict, replace
from datetime import UTC, datetime
from pathlib import Path

from django.conf import settings
from django.db import transaction

from sessions_app.core.ids import new_session_id, validate_session_id
from sessions_app.models import Session
from sessions_app.store import approvals, connections, file_lease, usage_ledger
from sessions_app.store.base import (
    ENTRY_SCHEMA_VERSION,
    TITLE_MAX,
    AgentMismatch,
    CorruptSessionFile,
    EntryRecord,
    NewEntry,
    Notice,
    SessionExists,
    SessionMeta,
    SessionNotFound,
    new_incarnation,
    record_from_fields,
)
from sessions_app.store.jsonl_search import JsonlSearchIndex, search_hit

logger = logging.getLogger(__name__)
TAIL_BYTES = 4096
META_COMPACT_BYTES = 4096
ENTRY_FIELDS = tuple(NewEntry.__dataclass_fields__)


def _now() -> datetime:
    return datetime.now(UTC)


class JsonlSessionStore:
    def __init__(self, root: Path | str | None = None):
        self.root = Path(root if root is not None else settings.SESSIONS_DIR)
        self.root.mkdir(parents=True, exist_ok=True)
        self._search = JsonlSearchIndex(
            self.root,
            read_entries=lambda session_id, after_seq: self.get_messages(
                session_id, after_seq=after_seq
            ),
            all_sessions=lambda: [(meta.id, meta.owner_id) for meta in self.list()],
        )

    # --- paths and locking --------------------------------------------------------------
    def _path(self, session_id: str, suffix: str) -> Path:
        return self.root / f"{validate_session_id(session_id)}{suffix}"

    @contextmanager
    def _locked(self, session_id: str):
        """Exclusive per-session lock across threads and processes.

        The lock file is removed by `delete`; a waiter that then wins the lock on the
        unlinked file must not proceed, so it checks that the path still names its file.
        """
        path = self._path(session_id, ".lock")
        while True:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
            fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                if os.fstat(fd).st_ino == os.stat(path).st_ino:
                    break
            except FileNotFoundError:
                pass
            os.close(fd)
        try:
            yield
        finally:
            os.close(fd)

    # --- meta ---------------------------------------------------------------------------
    def _read_meta(self, session_id: str) -> SessionMeta | None:
        path = self._path(session_id, ".meta.json")
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            return None
        return self._parse_meta(path, raw)

    @staticmethod
    def _parse_meta(path: Path, raw: bytes) -> SessionMeta:
        """The first line, updated by the last complete activity line after it."""
        first, _, updates = raw.partition(b"\n")
        number = 1
        try:
            data = json.loads(first)
            complete = updates[: updates.rfind(b"\n") + 1]
            if complete:
                number = complete.count(b"\n") + 1
                data.update(json.loads(complete[:-1].rsplit(b"\n", 1)[-1]))
            data["created_at"] = datetime.fromisoformat(data["created_at"])
            data["updated_at"] = datetime.fromisoformat(data["updated_at"])
            return SessionMeta(**data)
        except (ValueError, KeyError, TypeError) as error:
            raise CorruptSessionFile(path, number, f"unreadable session meta: {error}") from error

    def _write_meta(self, meta: SessionMeta, *, durable: bool) -> None:
        """Replace the meta file atomically with one line (write a temp file, rename over)."""
        path = self._path(meta.id, ".meta.json")
        tmp = path.with_name(path.name + ".tmp")
        with open(tmp, "wb") as handle:
            handle.write(_meta_line(meta))
            if durable:
                handle.flush()
                os.fsync(handle.fileno())
        os.replace(tmp, path)

    def _record_activity(self, session_id: str, meta_fd: int, last: EntryRecord) -> None:
        """Add the activity line, or rewrite the file as one line when it needs it.

        It needs it once it has grown past META_COMPACT_BYTES, and when its last line is
        torn (a crash mid-write; readers ignore it, but a line appended after it would not
        parse). No fsync: the jsonl file is the durable truth, and a meta file that lags
        behind after a power cut is corrected here on the next append.
        """
        size = os.fstat(meta_fd).st_size
        torn = size > 0 and os.pread(meta_fd, 1, size - 1) != b"\n"
        if torn or size > META_COMPACT_BYTES:
            meta = self._read_meta(session_id)
            self._write_meta(
                replace(meta, last_seq=last.seq, updated_at=last.created_at), durable=False
            )
            return
        line = json.dumps({"last_seq": last.seq, "updated_at": last.created_at.isoformat()})
        os.write(meta_fd, line.encode() + b"\n")

    # --- sessions -----------------------------------------------------------------------
    def create(self, session_id, agent="jarvis", owner_id=None, title="", spawned_by=None):
        with self._locked(session_id):
            existing = self._read_meta(session_id)
            if existing is None:
                now = _now()
                existing = SessionMeta(
                    id=session_id,
                    agent=agent,
                    owner_id=owner_id,
                    title=title,
                    parent_id=None,
                    branched_at_seq=None,
                    created_at=now,
                    updated_at=now,
                    last_seq=0,
                    incarnation=new_incarnation(),
                    spawned_by=spawned_by,
                )
                # Rows an earlier session of this id left behind (its files removed outside
                # the store, a crash mid-branch) must not show up in the new one.
                self._search.remove(session_id)
                self._path(session_id, ".jsonl").touch()
                self._write_meta(existing, durable=True)
        if existing.agent != agent:
            raise AgentMismatch(session_id, existing.agent, agent)
        return existing

    def set_title(self, session_id, title, incarnation=None):
        with self._locked(session_id):
            meta = self._current_meta(session_id, incarnation)
            meta = replace(meta, title=title[:TITLE_MAX])
            self._write_meta(meta, durable=True)
        return meta

    def set_model(self, session_id, model):
        with self._locked(session_id):
            meta = replace(self._current_meta(session_id, None), model=model)
            self._write_meta(meta, durable=True)
        return meta

    def set_thinking(self, session_id, thinking):
        with self._locked(session_id):
            meta = replace(self._current_meta(session_id, None), thinking=thinking)
            self._write_meta(meta, durable=True)
        return meta

    def set_flags(self, session_id, *, pinned=None, archived=None):
        with self._locked(session_id):
            meta = self._current_meta(session_id, None)
            if pinned is not None:
                meta = replace(meta, pinned=bool(pinned))
            if archived is not None:
                meta = replace(meta, archived=bool(archived))
            self._write_meta(meta, durable=True)
        return meta

    def get_meta(self, session_id):
        return self._read_meta(session_id)

    def _current_meta(self, session_id: str, incarnation: str | None) -> SessionMeta:
        """The meta, if the session exists (as of `incarnation`, if given); the caller holds
        the session's lock, so it cannot change before the caller's write."""
        meta = self._read_meta(session_id)
        if meta is None or (incarnation is not None and meta.incarnation != incarnation):
            raise SessionNotFound(session_id)
        return meta

    @contextmanager
    def fenced(self, session_id, incarnation=None):
        """A block in which the session (as of `incarnation`, if given) exists and stays:
        `delete` takes the same lock. Store methods must not be called inside it."""
        with self._locked(session_id):
            self._current_meta(session_id, incarnation)
            yield

    @contextmanager
    def locked(self, session_id, *, agent="jarvis", owner_id=None):
        """A transaction holding the lock of the session's anchor row; yields whether a row
        is locked.

        The conversation lives in files, but `session_delete` and `connection_open` must
        serialize in the database: connection rows are rows there, and a delete removes the
        files inside its transaction while the lock is held (removing them after commit
        would let a reconnect create the session first and then lose its files). So the
        session gets an anchor row, which connection rows need for their foreign key anyway.
        The anchor lasts as long as the session: `delete` removes it, and a block that ends
        with no session removes the one it made.
        """
        validate_session_id(session_id)
        with transaction.atomic():
            now = _now()
            # ON CONFLICT DO NOTHING: an uncommitted anchor of a concurrent delete makes this
            # wait for that delete, which is the point.
            Session.objects.bulk_create(
                [
                    Session(
                        id=session_id,
                        agent=agent,
                        owner_id=owner_id,
                        created_at=now,
                        updated_at=now,
                    )
                ],
                ignore_conflicts=True,
            )
            yield bool(
                list(Session.objects.select_for_update().filter(id=session_id).values_list("id"))
            )
            if self._read_meta(session_id) is None:
                Session.objects.filter(id=session_id).delete()

    def list(
        self, owner_id=None, agent=None, include_tests=True, include_subagents=True, archived=None
    ):
        metas = []
        # Only meta files are read: listing never touches a conversation's entries.
        for path in self.root.glob("*.meta.json"):
            try:
                meta = self._parse_meta(path, path.read_bytes())
            except FileNotFoundError:
                continue  # deleted while listing
            if owner_id is not None and meta.owner_id != owner_id:
                continue
            if agent is not None and meta.agent != agent:
                continue
            if not include_subagents and meta.spawned_by is not None:
                continue
            if archived is not None and meta.archived != bool(archived):
                continue
            if not include_tests and meta.id.startswith(tuple(settings.TEST_SESSION_PREFIXES)):
                continue
            metas.append(meta)
        metas.sort(key=lambda meta: (meta.updated_at, meta.id), reverse=True)
        return metas

    # --- entries ------------------------------------------------------------------------
    def get_messages(self, session_id, after_seq=0, limit=None):
        path = self._path(session_id, ".jsonl")
        try:
            with open(path, "rb") as handle:
                blob = handle.read()
        except FileNotFoundError:
            return []
        return self._parse_lines(session_id, path, blob, after_seq=after_seq, limit=limit)

    def _parse_lines(self, session_id, path, blob, *, after_seq=0, limit=None, first_line=1):
        """The entries of `blob` (whole lines of the file from line `first_line` on) after
        `after_seq`; a torn last line is ignored and reported, other damage raised."""
        records = []
        lines = blob.split(b"\n")
        expected = None
        for number, line in enumerate(lines, start=first_line):
            if not line:
                continue
            is_last = number == len(lines) + first_line - 1  # no newline after it: possibly torn
            try:
                record = self._parse_line(session_id, line)
            except (ValueError, KeyError, TypeError) as error:
                if is_last:
                    logger.warning("%s:%d: torn last line ignored (%s)", path, number, error)
                    break
                raise CorruptSessionFile(path, number, f"unreadable entry: {error}") from error
            if is_last:
                logger.warning("%s:%d: torn last line ignored (no line end)", path, number)
                break
            if expected is not None and record.seq != expected:
                raise CorruptSessionFile(
                    path, number, f"seq {record.seq} where {expected} was expected"
                )
            expected = record.seq + 1
            if record.seq > after_seq:
                records.append(record)
                if limit is not None and len(records) >= limit:
                    break
        return records

    def get_context_entries(self, session_id):
        """From the latest compaction's `first_kept_seq` on: the file is searched backwards
        for the newest compaction line and only the lines from its cut are parsed."""
        path = self._path(session_id, ".jsonl")
        try:
            with open(path, "rb") as handle:
                blob = handle.read()
        except FileNotFoundError:
            return []
        line_start = _last_compaction_line(blob)
        if line_start < 0:
            return self.get_messages(session_id)
        line_end = blob.find(b"\n", line_start)
        if line_end < 0:
            return self.get_messages(session_id)  # a torn last line: the careful reader
        compaction = self._parse_line(session_id, blob[line_start:line_end])
        first_kept = int((compaction.data or {}).get("first_kept_seq") or 0)
        first_kept = min(first_kept, compaction.seq)
        offset = blob.rfind(b'\n{"seq": %d, ' % first_kept, 0, line_start + 1) + 1
        # A cut that falls on tool results is moved back by the projection to the call they
        # answer (history.py): the read starts at the last message that is not one.
        while offset > 0:
            entry = self._parse_line(session_id, blob[offset : blob.find(b"\n", offset)])
            if entry.kind == "message" and entry.role != "tool":
                break
            offset = blob.rfind(b"\n", 0, offset - 1) + 1
        if offset == 0:
            return self.get_messages(session_id)  # from the first line (or no cut found)
        return self._parse_lines(
            session_id,
            path,
            blob[offset:],
            first_line=blob.count(b"\n", 0, offset) + 1,
        )

    @staticmethod
    def _parse_line(session_id: str, line: bytes) -> EntryRecord:
        data = json.loads(line)
        get = data.get
        return record_from_fields(
            {
                "session_id": session_id,
                "seq": int(data["seq"]),
                "kind": data["kind"],
                "role": get("role", ""),
                "content": get("content", ""),
                "tool_calls": get("tool_calls"),
                "tool_call_id": get("tool_call_id", ""),
                "name": get("name", ""),
                "is_error": bool(get("is_error", False)),
                "model": get("model", ""),
                "usage": get("usage"),
                "turn_id": get("turn_id", ""),
                "data": get("data"),
                "created_at": datetime.fromisoformat(data["created_at"]),
                # Lines written before entries had a version are version 1.
                "v": int(get("v", 1)),
            }
        )

    def _last_seq_on_disk(self, path: Path, handle) -> int:
        """The seq of the last complete line; a torn tail is cut off (and reported) first.

        Reads backwards from the end in growing windows: an append costs the same on the
        first turn and the thousandth.
        """
        size = handle.seek(0, os.SEEK_END)
        end = self._find_line_start(handle, size)  # just after the last newline
        if end < size:
            logger.warning("%s: torn last line of %d bytes removed", path, size - end)
            handle.truncate(end)
            handle.flush()
            os.fsync(handle.fileno())
        if end == 0:
            return 0
        start = self._find_line_start(handle, end - 1)
        handle.seek(start)
        last_line = handle.read(end - 1 - start)
        try:
            return int(json.loads(last_line)["seq"])
        except (ValueError, KeyError, TypeError) as error:
            # A complete line that does not parse is damage, not a torn write: refuse to add
            # to it. Counting lines means reading the file, which only this error path does.
            handle.seek(0)
            number = handle.read().count(b"\n")
            raise CorruptSessionFile(path, number, f"unreadable last entry: {error}") from error

    @staticmethod
    def _find_line_start(handle, before: int) -> int:
        """The offset just after the last newline before `before` (0 if there is none)."""
        window = TAIL_BYTES
        while True:
            start = max(0, before - window)
            handle.seek(start)
            newline = handle.read(before - start).rfind(b"\n")
            if newline >= 0:
                return start + newline + 1
            if start == 0:
                return 0
            window *= 4

    def append(self, session_id, entries, incarnation=None):
        entries = list(entries)
        if not entries:
            return []
        path = self._path(session_id, ".jsonl")
        with self._locked(session_id):
            if incarnation is not None:
                self._current_meta(session_id, incarnation)
            try:
                meta_fd = os.open(self._path(session_id, ".meta.json"), os.O_RDWR | os.O_APPEND)
            except FileNotFoundError:
                raise SessionNotFound(session_id) from None
            try:
                records = self._write_entries(path, session_id, entries)
                self._record_activity(session_id, meta_fd, records[-1])
            finally:
                os.close(meta_fd)
            self._search.add(session_id, records, owner_id=lambda: self._owner_id(session_id))
        return records

    def _owner_id(self, session_id: str) -> int | None:
        return self._read_meta(session_id).owner_id

    def _write_entries(self, path, session_id, entries: list[NewEntry]) -> list[EntryRecord]:
        now = _now()
        with open(path, "a+b") as handle:
            first_seq = self._last_seq_on_disk(path, handle) + 1
            records = [
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
            payload = b"".join(_line(record) for record in records)
            # One write + fsync: the whole batch is on disk, or (torn) ignored on read.
            handle.write(payload)
            handle.flush()
            os.fsync(handle.fileno())
        return records

    def delete(self, session_id):
        """Remove the session's rows (connections, approval requests, the anchor), then its
        files; its branches stay, without a parent."""
        validate_session_id(session_id)
        # The rows first: inside a caller's transaction a failure there rolls them back and
        # leaves the files, so nothing is half deleted.
        connections.remove_for_session(session_id)
        approvals.remove_for_session(session_id)
        usage_ledger.remove_for_session(session_id)
        Session.objects.filter(id=session_id).delete()
        with self._locked(session_id):
            # The index first: a crash between the two can leave a conversation unfound,
            # never a deleted one found.
            self._search.remove(session_id)
            existed = False
            for suffix in (".jsonl", ".meta.json", ".proactive.jsonl"):
                try:
                    self._path(session_id, suffix).unlink()
                    existed = True
                except FileNotFoundError:
                    pass
            branches = self._path(session_id, ".branches")
            try:
                children = branches.read_text().split()
            except FileNotFoundError:
                children = []
            self._path(session_id, ".lock").unlink(missing_ok=True)
        # Branches outlive their parent without a dangling parent_id (the db's SET_NULL).
        # Each child is rewritten under its own lock; the index goes last, so a delete cut
        # short by a crash is finished by the next delete of this id.
        for child_id in dict.fromkeys(children):
            self._forget_parent(child_id, session_id)
        branches.unlink(missing_ok=True)
        return existed

    def _forget_parent(self, child_id: str, parent_id: str) -> None:
        with self._locked(child_id):
            meta = self._read_meta(child_id)
            if meta is not None and meta.parent_id == parent_id:
                self._write_meta(replace(meta, parent_id=None), durable=True)

    def get_turn_tail(self, session_id, up_to_seq):
        """The entries of the last turn (or exchange) up to `up_to_seq`: all a repair reads."""
        validate_session_id(session_id)
        if up_to_seq is not None and int(up_to_seq) <= 0:
            return []
        # None: up to the file's last complete line, never the meta's `last_seq`, which a
        # crash between the entries' fsync and the activity line leaves behind.
        blob, _cut, parsed = self._cut_source(
            session_id, None if up_to_seq is None else int(up_to_seq)
        )
        return parsed if parsed is not None else self._repair_window(session_id, blob)

    def create_branch(
        self, source_id, new_id=None, at_seq=None, owner_id=None, closing=(), incarnation=None
    ):
        """Copy a session up to `at_seq` into a new, independent session.

        Steps: check the source (as of `incarnation`, if given); read its file once and take
        the lines up to the cut (byte for byte when the file is well formed, see
        `_cut_source`); write the copy and `closing` after it; write the meta file last,
        which is the moment the branch starts to exist for readers.
        """
        new_id = validate_session_id(new_id) if new_id is not None else new_session_id()
        source = self.get_meta(source_id)
        if source is None or (incarnation is not None and source.incarnation != incarnation):
            raise SessionNotFound(source_id)
        copied, cut, _parsed = self._cut_source(source_id, at_seq)
        closing = list(closing)
        with self._locked(new_id):
            if self._read_meta(new_id) is not None:
                raise SessionExists(f"session {new_id!r} already exists")
            # Indexed before the branch exists: a crash in between leaves an index line
            # naming no branch (skipped on delete), never a branch the index misses.
            with open(self._path(source_id, ".branches"), "ab") as handle:
                handle.write(new_id.encode() + b"\n")
            now = _now()
            path = self._path(new_id, ".jsonl")
            with open(path, "wb") as handle:
                handle.write(copied)
                handle.flush()
                os.fsync(handle.fileno())
            meta = SessionMeta(
                id=new_id,
                agent=source.agent,
                owner_id=source.owner_id if owner_id is None else owner_id,
                title=source.title,
                parent_id=source_id,
                branched_at_seq=cut,
                created_at=now,
                updated_at=now,
                last_seq=cut,
                incarnation=new_incarnation(),
                model=source.model,
                thinking=source.thinking,
            )
            self._search.copy(source_id, new_id, cut, meta.owner_id)
            if closing:
                records = self._write_entries(path, new_id, closing)
                meta = SessionMeta(**{**asdict(meta), "last_seq": records[-1].seq})
                self._search.add(new_id, records, owner_id=lambda: meta.owner_id)
            self._write_meta(meta, durable=True)
        return meta

    def _cut_source(self, source_id, at_seq) -> tuple[bytes, int, list[EntryRecord] | None]:
        """The bytes of lines 1..cut, the cut, and the entries up to it if they were parsed.

        Lines carry no session id, so a well-formed file is copied byte for byte; parsing
        2,000 entries to write them back unchanged made a branch ~30x a file copy. "Well
        formed" is checked at C speed: n complete lines, each ending in `}`, the first
        `{"seq": 1, …` and the last `{"seq": n, …`. Anything else takes the slow path, which
        parses every line and reports damage by file and line. (Damage inside a line body
        that keeps this shape is copied as it is, and reading either file reports it.)
        """
        path = self._path(source_id, ".jsonl")
        try:
            blob = path.read_bytes()
        except FileNotFoundError:
            blob = b""
        end = blob.rfind(b"\n") + 1
        if end < len(blob):
            logger.warning("%s: torn last line ignored (no line end)", path)
        blob = blob[:end]
        count = blob.count(b"\n")
        last_start = blob.rfind(b"\n", 0, end - 1) + 1
        well_formed = count == 0 or (
            blob.startswith(b'{"seq": 1, ')
            and blob.startswith(b'{"seq": %d, ' % count, last_start)
            and blob.count(b"}\n") == count
        )
        if not well_formed:
            entries = self.get_messages(source_id)  # raises CorruptSessionFile on damage
            cut = self._check_cut(entries[-1].seq if entries else 0, at_seq)
            copied = [entry for entry in entries if entry.seq <= cut]
            return b"".join(_line(entry) for entry in copied), cut, copied
        cut = self._check_cut(count, at_seq)
        if cut < count:
            end = blob.find(b'\n{"seq": %d, ' % (cut + 1)) + 1
        return blob[:end], cut, None

    @staticmethod
    def _check_cut(last: int, at_seq) -> int:
        cut = last if at_seq is None else int(at_seq)
        if not 0 <= cut <= last:
            raise ValueError(f"at_seq must be between 0 and {last}, not {at_seq!r}")
        return cut

    def _repair_window(self, session_id: str, blob: bytes) -> list[EntryRecord]:
        """Parse the lines repair looks at: from the last turn marker on, or (a history
        without markers) from the last user or assistant message on."""
        marker = _last_turn_marker(blob)
        if marker >= 0:
            return [self._parse_line(session_id, line) for line in blob[marker:].splitlines()]
        window: list[EntryRecord] = []
        end = len(blob)
        while end > 0:
            start = blob.rfind(b"\n", 0, end - 1) + 1
            entry = self._parse_line(session_id, blob[start : end - 1])
            window.append(entry)
            if entry.kind == "message" and entry.role in {"user", "assistant"}:
                break
            end = start
        return window[::-1]

    # --- turn lease ---------------------------------------------------------------------
    def turn_lease(self, session_id, owner_id=None):
        return file_lease.FileTurnLease(self, validate_session_id(session_id), owner_id)

    def request_turn_abort(self, session_id):
        return file_lease.request_abort(self.root, validate_session_id(session_id))

    # --- proactive notices --------------------------------------------------------------
    def append_proactive(self, session_id, message_id, content, incarnation=None):
        with self._locked(session_id):
            self._current_meta(session_id, incarnation)
            for notice in self.get_proactive(session_id):
                if notice.message_id == message_id:
                    return notice, False
            notice = Notice(
                session_id=session_id, message_id=message_id, content=content, created_at=_now()
            )
            line = json.dumps(
                {
                    "message_id": message_id,
                    "content": content,
                    "created_at": notice.created_at.isoformat(),
                    "delivered_at": None,
                },
                ensure_ascii=False,
            )
            with open(self._path(session_id, ".proactive.jsonl"), "ab") as handle:
                handle.write(line.encode() + b"\n")
                handle.flush()
                os.fsync(handle.fileno())
        return notice, True

    def get_proactive(self, session_id):
        path = self._path(session_id, ".proactive.jsonl")
        try:
            lines = path.read_bytes().split(b"\n")
        except FileNotFoundError:
            return []
        notices: dict[str, Notice] = {}
        for number, line in enumerate(lines, start=1):
            if not line:
                continue
            try:
                data = json.loads(line)
            except ValueError as error:
                if number == len(lines):
                    logger.warning("%s:%d: torn last line ignored", path, number)
                    break
                raise CorruptSessionFile(path, number, f"unreadable notice: {error}") from error
            if "delivered" in data:
                # A delivery line (mark_proactive_delivered): the first one for a notice wins.
                notice = notices.get(data["delivered"])
                if notice is not None and notice.delivered_at is None:
                    notices[notice.message_id] = replace(
                        notice, delivered_at=datetime.fromisoformat(data["delivered_at"])
                    )
                continue
            notices[data["message_id"]] = Notice(
                session_id=session_id,
                message_id=data["message_id"],
                content=data["content"],
                created_at=datetime.fromisoformat(data["created_at"]),
                delivered_at=(
                    datetime.fromisoformat(data["delivered_at"])
                    if data.get("delivered_at")
                    else None
                ),
            )
        return list(notices.values())

    def get_proactive_owned(self, sessions):
        found: dict[str, list[Notice]] = {}
        for session_id, owner_id in sessions.items():
            if not self._path(session_id, ".proactive.jsonl").exists():
                continue  # most sessions never get a notice: no meta file read for them
            meta = self._read_meta(session_id)
            if meta is not None and meta.owner_id == owner_id:
                notices = self.get_proactive(session_id)
                if notices:
                    found[session_id] = notices
        return found

    def mark_proactive_delivered(self, session_id, message_id, delivered_at):
        # The notices file is append-only like the entries: a delivery is one more line, so
        # a crash mid-write can only tear that line, never a notice.
        with self._locked(session_id):
            if self._read_meta(session_id) is None:
                return None
            notice = next(
                (n for n in self.get_proactive(session_id) if n.message_id == message_id), None
            )
            if notice is None or notice.delivered_at is not None:
                return notice
            line = json.dumps(
                {"delivered": message_id, "delivered_at": delivered_at.isoformat()},
                ensure_ascii=False,
            )
            with open(self._path(session_id, ".proactive.jsonl"), "ab") as handle:
                handle.write(line.encode() + b"\n")
                handle.flush()
                os.fsync(handle.fileno())
        return replace(notice, delivered_at=delivered_at)

    # --- search ---------------------------------------------------------------------------
    def search(self, owner_id, query, limit=20, offset=0):
        hits = []
        titles: dict[str, str | None] = {}
        for row in self._search.search(owner_id, query, int(limit), int(offset)):
            session_id = row[0]
            if session_id not in titles:
                meta = self._read_meta(session_id)
                ok = meta is not None and meta.owner_id == owner_id
                titles[session_id] = meta.title if ok else None
            # A session whose files went away outside the store is never shown.
            if titles[session_id] is not None:
                hits.append(search_hit(row, titles[session_id]))
        return hits


def _last_turn_marker(blob: bytes) -> int:
    """Offset of the last line whose own kind is `turn_start` or `turn_end`, or -1.

    One backwards byte search for both kinds. A dict inside `data` could hold the same
    bytes, so a hit counts only when it directly follows the line's `{"seq": <digits>`.
    """
    end = len(blob)
    while (hit := blob.rfind(b', "kind": "turn_', 0, end)) >= 0:
        start = blob.rfind(b"\n", 0, hit) + 1
        prefix = blob[start:hit]
        after = hit + len(b', "kind": "turn_')
        if (
            prefix.startswith(b'{"seq": ')
            and prefix[8:].isdigit()
            and blob.startswith((b'start"', b'end"'), after)
        ):
            return start
        end = hit
    return -1


def _last_compaction_line(blob: bytes) -> int:
    """Offset of the last line whose own kind is `compaction`, or -1 (as _last_turn_marker:
    a hit counts only right after the line's `{"seq": <digits>`)."""
    end = len(blob)
    while (hit := blob.rfind(b', "kind": "compaction"', 0, end)) >= 0:
        start = blob.rfind(b"\n", 0, hit) + 1
        prefix = blob[start:hit]
        if prefix.startswith(b'{"seq": ') and prefix[8:].isdigit():
            return start
        end = hit
    return -1


def _entry_fields(entry: NewEntry) -> dict:
    return {field: getattr(entry, field) for field in ENTRY_FIELDS}


def _line(record: EntryRecord) -> bytes:
    # seq first: a line says which entry it is at a glance. No session_id: the file name
    # says it, and a branch copies lines byte for byte.
    fields = record.__dict__
    data = {"seq": record.seq}
    for field in ENTRY_FIELDS:
        data[field] = fields[field]
    data["created_at"] = record.created_at.isoformat()
    # Last, so that a line still starts `{"seq": N, "kind": …` (see _last_turn_marker).
    data["v"] = fields["v"]
    return json.dumps(data, ensure_ascii=False).encode() + b"\n"


def _meta_line(meta: SessionMeta) -> bytes:
    data = asdict(meta)
    data["created_at"] = meta.created_at.isoformat()
    data["updated_at"] = meta.updated_at.isoformat()
    return json.dumps(data, ensure_ascii=False).encode() + b"\n"
