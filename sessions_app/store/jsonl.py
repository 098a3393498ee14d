"""The `jsonl` backend: one directory of plain files, readable with any text tool.

Per session: `<id>.jsonl` (one entry per line, with its seq — the source of truth),
`<id>.meta.json` (agent, owner, title, parent, activity and last seq — what `list` reads),
`<id>.proactive.jsonl` (notices) and `<id>.lock` (an flock that serializes writers across
threads and processes). Session ids never contain '/' and never start with '.', so no id can
name a file outside the directory (sessions_app.ids).
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
from contextlib import contextmanager
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path

from django.conf import settings

from sessions_app.ids import new_session_id, validate_session_id
from sessions_app.runtime.history import repair_entries
from sessions_app.store.base import (
    AgentMismatch,
    CorruptSessionFile,
    EntryRecord,
    NewEntry,
    Notice,
    SessionExists,
    SessionMeta,
    SessionNotFound,
)
from sessions_app.store.db import BRANCH_RESULT_TEXT, BRANCH_TURN_ERROR

logger = logging.getLogger(__name__)
TAIL_BYTES = 65536


def _now() -> datetime:
    return datetime.now(UTC)


class JsonlSessionStore:
    def __init__(self, root: Path | str | None = None):
        self.root = Path(root if root is not None else settings.SESSIONS_DIR)
        self.root.mkdir(parents=True, exist_ok=True)

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
            raw = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
        return self._parse_meta(path, raw)

    @staticmethod
    def _parse_meta(path: Path, raw: str) -> SessionMeta:
        try:
            data = json.loads(raw)
            data["created_at"] = datetime.fromisoformat(data["created_at"])
            data["updated_at"] = datetime.fromisoformat(data["updated_at"])
            return SessionMeta(**data)
        except (ValueError, KeyError, TypeError) as error:
            raise CorruptSessionFile(path, 1, f"unreadable session meta: {error}") from error

    def _write_meta(self, meta: SessionMeta, *, durable: bool) -> None:
        """Replace the meta file atomically (write a temp file, rename over).

        Appends skip the fsync here: the jsonl file is the durable truth, and a meta file
        that lags behind after a power cut is corrected from the jsonl tail on next append.
        """
        path = self._path(meta.id, ".meta.json")
        data = asdict(meta)
        data["created_at"] = meta.created_at.isoformat()
        data["updated_at"] = meta.updated_at.isoformat()
        tmp = path.with_name(path.name + ".tmp")
        with open(tmp, "w", encoding="utf-8") as handle:
            json.dump(data, handle, ensure_ascii=False)
            if durable:
                handle.flush()
                os.fsync(handle.fileno())
        os.replace(tmp, path)

    # --- sessions -----------------------------------------------------------------------
    def create(self, session_id, agent="jarvis", owner_id=None, title=""):
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
                )
                self._path(session_id, ".jsonl").touch()
                self._write_meta(existing, durable=True)
        if existing.agent != agent:
            raise AgentMismatch(session_id, existing.agent, agent)
        return existing

    def get_meta(self, session_id):
        return self._read_meta(session_id)

    def list(self, owner_id=None, agent=None, include_tests=True):
        metas = []
        # Only meta files are read: listing never touches a conversation's entries.
        for path in self.root.glob("*.meta.json"):
            try:
                meta = self._parse_meta(path, path.read_text(encoding="utf-8"))
            except FileNotFoundError:
                continue  # deleted while listing
            if owner_id is not None and meta.owner_id != owner_id:
                continue
            if agent is not None and meta.agent != agent:
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
        records = []
        lines = blob.split(b"\n")
        expected = None
        for number, line in enumerate(lines, start=1):
            if not line:
                continue
            is_last = number == len(lines)  # no newline after it: possibly torn
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

    @staticmethod
    def _parse_line(session_id: str, line: bytes) -> EntryRecord:
        data = json.loads(line)
        return EntryRecord(
            session_id=session_id,
            seq=int(data["seq"]),
            kind=data["kind"],
            role=data.get("role", ""),
            content=data.get("content", ""),
            tool_calls=data.get("tool_calls"),
            tool_call_id=data.get("tool_call_id", ""),
            name=data.get("name", ""),
            is_error=bool(data.get("is_error", False)),
            model=data.get("model", ""),
            usage=data.get("usage"),
            turn_id=data.get("turn_id", ""),
            data=data.get("data"),
            created_at=datetime.fromisoformat(data["created_at"]),
        )

    def _last_seq_on_disk(self, path: Path, handle) -> int:
        """The seq of the last complete line; a torn tail is cut off (and reported) first."""
        size = handle.seek(0, os.SEEK_END)
        if size == 0:
            return 0
        start = max(0, size - TAIL_BYTES)
        handle.seek(start)
        tail = handle.read()
        if not tail.endswith(b"\n"):
            keep = start + tail.rfind(b"\n") + 1 if b"\n" in tail else 0
            logger.warning("%s: torn last line of %d bytes removed", path, size - keep)
            handle.truncate(keep)
            handle.flush()
            os.fsync(handle.fileno())
            if keep == 0:
                return 0
            tail = tail[: keep - start]
        last_line = tail.rstrip(b"\n").rsplit(b"\n", 1)[-1]
        if len(last_line) == len(tail.rstrip(b"\n")) and start > 0:
            # The last line is longer than the tail window: read the whole file.
            handle.seek(0)
            last_line = handle.read().rstrip(b"\n").rsplit(b"\n", 1)[-1]
        try:
            return int(json.loads(last_line)["seq"])
        except (ValueError, KeyError, TypeError) as error:
            # A complete line that does not parse is damage, not a torn write: refuse to add
            # to it. Counting lines means reading the file, which only this error path does.
            handle.seek(0)
            number = handle.read().count(b"\n")
            raise CorruptSessionFile(path, number, f"unreadable last entry: {error}") from error

    def append(self, session_id, entries):
        entries = list(entries)
        if not entries:
            return []
        path = self._path(session_id, ".jsonl")
        with self._locked(session_id):
            meta = self._read_meta(session_id)
            if meta is None:
                raise SessionNotFound(session_id)
            records = self._write_entries(path, session_id, entries, meta)
            self._write_meta(
                SessionMeta(
                    **{
                        **asdict(meta),
                        "updated_at": records[-1].created_at,
                        "last_seq": records[-1].seq,
                    }
                ),
                durable=False,
            )
        return records

    def _write_entries(self, path, session_id, entries: list[NewEntry], meta) -> list[EntryRecord]:
        now = _now()
        with open(path, "a+b") as handle:
            first_seq = self._last_seq_on_disk(path, handle) + 1
            records = [
                EntryRecord(
                    session_id=session_id,
                    seq=first_seq + offset,
                    created_at=now,
                    **_entry_fields(entry),
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
        with self._locked(session_id):
            existed = False
            for suffix in (".jsonl", ".meta.json", ".proactive.jsonl"):
                try:
                    self._path(session_id, suffix).unlink()
                    existed = True
                except FileNotFoundError:
                    pass
            self._path(session_id, ".lock").unlink(missing_ok=True)
        return existed

    def create_branch(self, source_id, new_id=None, at_seq=None, owner_id=None):
        new_id = validate_session_id(new_id) if new_id is not None else new_session_id()
        source = self.get_meta(source_id)
        if source is None:
            raise SessionNotFound(source_id)
        entries = self.get_messages(source_id)
        last = entries[-1].seq if entries else 0
        cut = last if at_seq is None else int(at_seq)
        if not 0 <= cut <= last:
            raise ValueError(f"at_seq must be between 0 and {last}, not {at_seq!r}")
        copied = [entry for entry in entries if entry.seq <= cut]
        repairs = repair_entries(
            copied, result_text=BRANCH_RESULT_TEXT, turn_error=BRANCH_TURN_ERROR
        )
        with self._locked(new_id):
            if self._read_meta(new_id) is not None:
                raise SessionExists(f"session {new_id!r} already exists")
            now = _now()
            path = self._path(new_id, ".jsonl")
            with open(path, "wb") as handle:
                handle.write(b"".join(_line(record, session_id=new_id) for record in copied))
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
            )
            if repairs:
                records = self._write_entries(path, new_id, repairs, meta)
                meta = SessionMeta(**{**asdict(meta), "last_seq": records[-1].seq})
            # The meta file appears last: until then the branch does not exist for readers.
            self._write_meta(meta, durable=True)
        return meta

    # --- proactive notices --------------------------------------------------------------
    def append_proactive(self, session_id, message_id, content):
        with self._locked(session_id):
            if self._read_meta(session_id) is None:
                raise SessionNotFound(session_id)
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
        notices = []
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
            notices.append(
                Notice(
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
            )
        return notices


def _entry_fields(entry: NewEntry) -> dict:
    return {field: getattr(entry, field) for field in NewEntry.__dataclass_fields__}


def _line(record: EntryRecord, session_id: str | None = None) -> bytes:
    data = record.to_dict()
    del data["session_id"]  # the file name says it; a branch copy must not carry the old one
    return json.dumps(data, ensure_ascii=False).encode() + b"\n"
