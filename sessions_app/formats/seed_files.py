"""The seed's file layout, written and read back (docs/design.md §20).

A directory holds, per session:
- `<id>.meta.json`: the session's meta as one JSON object on its first line. It is the jsonl
  backend's meta file: later lines (that backend's activity lines) update the first, the
  last complete one winning;
- `<id>.jsonl`: one entry per line in seq order — `seq` first, then every field the store
  keeps, `v` (the entry's schema version) and `created_at` (ISO 8601). It is the jsonl
  backend's line format, so a jsonl SESSIONS_DIR reads like an export.

Beside them, once per directory, `.request-headers.jsonl`: one `{"digest", "body"}` line per
request header the sessions' `turn_start` entries name (§20), so that the requests of an
imported turn can still be rebuilt. Its name starts with a dot, which no session id may, so
it never reads as a session.

Reading checks every line: damage is a `SeedFileError` naming the file and line, never a
guess; a torn last line (a crash mid-write, no line end) is left out and reported, as the
jsonl backend does. Pure file work: nothing here touches a store.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import Any

from sessions_app.core.ids import InvalidSessionId, validate_session_id
from sessions_app.core.limits import TITLE_MAX_CHARS, InputInvalid, storable_check
from sessions_app.runtime.providers import check_model_spec
from sessions_app.store import EntryRecord, NewEntry, SessionMeta

META_SUFFIX = ".meta.json"
ENTRIES_SUFFIX = ".jsonl"
HEADERS_FILE = ".request-headers.jsonl"
# The entry schema version this code writes, and every one it reads.
ENTRY_VERSION = 1
KNOWN_ENTRY_VERSIONS = frozenset({1})
NEW_ENTRY_FIELDS = frozenset(NewEntry.__dataclass_fields__)
# What each field of an entry line must hold; a field added later passes through unchecked.
FIELD_TYPES: dict[str, tuple[type, ...]] = {
    "kind": (str,),
    "role": (str,),
    "content": (str,),
    "tool_calls": (list, type(None)),
    "tool_call_id": (str,),
    "name": (str,),
    "is_error": (bool,),
    "model": (str,),
    "usage": (dict, type(None)),
    "turn_id": (str,),
    "data": (dict, type(None)),
}
# Text fields of an entry kept in columns this wide (sessions_app.models.Entry).
COLUMN_WIDTHS = {
    "kind": 32,
    "role": 16,
    "tool_call_id": 200,
    "name": 200,
    "model": 200,
    "turn_id": 64,
}


class SeedFileError(Exception):
    """A file of the layout that cannot be read as it is; `line` 0 means the whole file."""

    def __init__(self, path: Path, line: int, reason: str):
        super().__init__(f"{path}:{line}: {reason}" if line else f"{path}: {reason}")
        self.path = path
        self.line = line
        self.reason = reason


@dataclass(frozen=True)
class SeedSession:
    """One session as its files hold it: the meta fields an import uses, and its entries."""

    source_id: str
    created_at: datetime
    agent: str
    title: str
    model: str
    spawned_by: str | None
    entries: list[NewEntry]
    entries_path: Path
    # Line number of a torn last line that was left out, else 0.
    torn_line: int = 0


# --- writing --------------------------------------------------------------------------------


def entry_line(record: EntryRecord) -> bytes:
    """The entry as one line: seq first, every stored field, `v` when the record has none."""
    fields = record.to_dict()
    fields.pop("session_id")
    line: dict[str, Any] = {"seq": fields.pop("seq"), **fields}
    line.setdefault("v", ENTRY_VERSION)
    return json.dumps(line, ensure_ascii=False).encode() + b"\n"


def meta_line(meta: SessionMeta) -> bytes:
    data = asdict(meta)
    data["created_at"] = meta.created_at.isoformat()
    data["updated_at"] = meta.updated_at.isoformat()
    return json.dumps(data, ensure_ascii=False).encode() + b"\n"


def _replace_file(path: Path, content: bytes) -> None:
    """Write a temporary file beside `path`, then rename it over: never half a file."""
    descriptor, tmp_name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(descriptor, "wb") as handle:
            handle.write(content)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp_name, path)
    except BaseException:
        Path(tmp_name).unlink(missing_ok=True)
        raise


def write_session(directory: Path, meta: SessionMeta, records: Sequence[EntryRecord]) -> None:
    """Write `<id>.jsonl`, then `<id>.meta.json` (whose `last_seq` is the entries' own: on the
    jsonl backend the stored meta can lag them). The meta last, as the jsonl backend does:
    a directory read during the export shows a session whole or not at all."""
    last_seq = records[-1].seq if records else 0
    _replace_file(
        directory / f"{meta.id}{ENTRIES_SUFFIX}", b"".join(entry_line(r) for r in records)
    )
    _replace_file(
        directory / f"{meta.id}{META_SUFFIX}", meta_line(replace(meta, last_seq=last_seq))
    )


def write_headers(directory: Path, headers: dict[str, dict[str, Any]]) -> None:
    """`.request-headers.jsonl`: the headers by digest, in digest order."""
    lines = (
        json.dumps({"digest": digest, "body": headers[digest]}, ensure_ascii=False).encode() + b"\n"
        for digest in sorted(headers)
    )
    _replace_file(directory / HEADERS_FILE, b"".join(lines))


# --- reading --------------------------------------------------------------------------------


def read_headers(directory: Path) -> list[tuple[int, str, dict[str, Any]]]:
    """(line number, digest, body) per line of `.request-headers.jsonl`; none when the
    directory has no such file (an export made before it existed, a jsonl SESSIONS_DIR)."""
    path = directory / HEADERS_FILE
    lines, torn = _json_lines(path)
    if torn:
        raise SeedFileError(path, torn, "torn last line: the file was cut short")
    headers = []
    for number, value in lines:
        if not (
            isinstance(value, dict)
            and isinstance(value.get("digest"), str)
            and isinstance(value.get("body"), dict)
        ):
            raise SeedFileError(path, number, "not a header: expected {digest, body}")
        headers.append((number, value["digest"], value["body"]))
    return headers


def _json_lines(path: Path) -> tuple[list[tuple[int, Any]], int]:
    """(line number, parsed object) per complete line, and the number of a torn last line
    left out (0 if none). A complete line that is not JSON is a SeedFileError."""
    try:
        blob = path.read_bytes()
    except FileNotFoundError:
        return [], 0
    lines = blob.split(b"\n")
    parsed = []
    torn = 0
    for number, raw in enumerate(lines, start=1):
        if not raw:
            continue
        if number == len(lines):  # no line end after it: a write cut short
            torn = number
            break
        try:
            parsed.append((number, json.loads(raw)))
        except ValueError as error:
            raise SeedFileError(path, number, f"not a JSON line: {error}") from error
        except RecursionError as error:
            raise SeedFileError(path, number, "JSON nested too deep to read") from error
    return parsed, torn


def _storable(path: Path, number: int, text: str, name: str) -> None:
    """A SeedFileError for text no database keeps (NUL, lone surrogates): PostgreSQL
    would refuse it halfway through the import."""
    try:
        storable_check(text, name=name)
    except InputInvalid as error:
        raise SeedFileError(path, number, str(error)) from error


def _timestamp(path: Path, number: int, value: object, what: str) -> datetime:
    try:
        stamp = datetime.fromisoformat(value)  # type: ignore[arg-type]
    except (TypeError, ValueError) as error:
        raise SeedFileError(path, number, f"{what} is not an ISO 8601 time: {value!r}") from error
    if stamp.tzinfo is None:
        raise SeedFileError(path, number, f"{what} has no time zone: {value!r}")
    return stamp


def _read_meta(path: Path, session_id: str) -> dict[str, Any]:
    lines, _torn = _json_lines(path)
    if not lines:
        raise SeedFileError(path, 1, "empty meta file")
    data: dict[str, Any] = {}
    for number, value in lines:
        if not isinstance(value, dict):
            raise SeedFileError(path, number, "a meta line is a JSON object")
        data.update(value)
    if data.get("id") != session_id:
        raise SeedFileError(path, 1, f"id {data.get('id')!r} does not match the file name")
    for name, default in (("agent", "jarvis"), ("title", ""), ("model", "")):
        data.setdefault(name, default)
        if not isinstance(data[name], str):
            raise SeedFileError(path, 1, f"{name} must be a string, not {data[name]!r:.80}")
        _storable(path, 1, data[name], name)
    if len(data["title"]) > TITLE_MAX_CHARS:
        raise SeedFileError(path, 1, f"the title is longer than {TITLE_MAX_CHARS} characters")
    if data["model"]:
        try:
            check_model_spec(data["model"])
        except ValueError as error:
            raise SeedFileError(path, 1, str(error)) from error
    spawned_by = data.get("spawned_by")
    if spawned_by is not None and not isinstance(spawned_by, str):
        raise SeedFileError(path, 1, f"spawned_by must be a session id, not {spawned_by!r}")
    data["created_at"] = _timestamp(path, 1, data.get("created_at"), "created_at")
    return data


def _entry(path: Path, number: int, value: object, expected_seq: int) -> NewEntry:
    if not isinstance(value, dict):
        raise SeedFileError(path, number, "an entry line is a JSON object")
    seq = value.get("seq")
    if seq != expected_seq or isinstance(seq, bool):
        raise SeedFileError(path, number, f"seq {seq!r} where {expected_seq} was expected")
    version = value.get("v", 1)
    if version not in KNOWN_ENTRY_VERSIONS or isinstance(version, bool):
        known = ", ".join(str(v) for v in sorted(KNOWN_ENTRY_VERSIONS))
        raise SeedFileError(path, number, f"entry version {version!r} is not one of {known}")
    if "created_at" in value:
        _timestamp(path, number, value["created_at"], "created_at")
    for name, types in FIELD_TYPES.items():
        if name in value and not isinstance(value[name], types):
            raise SeedFileError(path, number, f"{name} has the wrong type: {value[name]!r:.80}")
    for name, width in COLUMN_WIDTHS.items():
        if len(value.get(name) or "") > width:
            raise SeedFileError(path, number, f"{name} is longer than {width} characters")
    for name in ("content", "tool_call_id", "name", "model", "turn_id"):
        _storable(path, number, value.get(name) or "", name)
    try:
        return NewEntry(**{name: value[name] for name in NEW_ENTRY_FIELDS if name in value})
    except (TypeError, ValueError, AttributeError) as error:
        raise SeedFileError(path, number, f"not an entry: {error}") from error


def read_session(directory: Path, session_id: str) -> SeedSession:
    meta_path = directory / f"{session_id}{META_SUFFIX}"
    entries_path = directory / f"{session_id}{ENTRIES_SUFFIX}"
    meta = _read_meta(meta_path, session_id)
    lines, torn = _json_lines(entries_path)
    entries = [
        _entry(entries_path, number, value, expected_seq)
        for expected_seq, (number, value) in enumerate(lines, start=1)
    ]
    return SeedSession(
        source_id=session_id,
        created_at=meta["created_at"],
        agent=meta["agent"],
        title=meta["title"],
        model=meta["model"],
        spawned_by=meta.get("spawned_by"),
        entries=entries,
        entries_path=entries_path,
        torn_line=torn,
    )


def read_directory(directory: Path) -> tuple[list[SeedSession], list[SeedFileError]]:
    """Every session of the directory (one per meta file, by id), and every file error.

    Reading goes on past a damaged session, so that one run names all the damage.
    """
    if not directory.is_dir():
        raise SeedFileError(directory, 0, "not a directory")
    sessions, errors = [], []
    for meta_path in sorted(directory.glob(f"*{META_SUFFIX}")):
        session_id = meta_path.name[: -len(META_SUFFIX)]
        try:
            validate_session_id(session_id)
            sessions.append(read_session(directory, session_id))
        except InvalidSessionId as error:
            errors.append(SeedFileError(meta_path, 0, f"not a session file: {error}"))
        except SeedFileError as error:
            errors.append(error)
    return sessions, errors
