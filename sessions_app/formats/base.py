"""What both readers share: the conversations they make, their refusals, the file's budget
and text a database can keep.

A file is refused whole (nothing imported) before anything is written when it is not what
it was said to be (400, naming where) or when it is more than an import takes (413, naming
the limit). Everything a reader does is bounded by the budget and linear in the file.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from django.conf import settings

from jarvis_site.shared.errors import Code, DomainError
from sessions_app.store import NewEntry

# The width of the columns an import fills with ids from the file (ImportedSession.source_id,
# Entry.tool_call_id); a longer id is kept as a digest of itself.
ID_MAX_CHARS = 200
TITLE_MAX_CHARS = 200
MODEL_MAX_CHARS = 200
# Characters no database keeps: NUL (PostgreSQL refuses it) and halves of surrogate pairs.
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")
_EPOCH = datetime.fromtimestamp(0, tz=UTC)


class ForeignFormatInvalid(DomainError, ValueError):
    """The file cannot be imported as it is; nothing was imported."""

    code = Code.IMPORT_REFUSED


class NotAChatGptExport(ForeignFormatInvalid):
    code = Code.NOT_A_CHATGPT_EXPORT


class NotAnOpenAIAgentsDatabase(ForeignFormatInvalid):
    code = Code.NOT_AN_OPENAI_AGENTS_DATABASE


class ImportTooLarge(ForeignFormatInvalid):
    """More than one import takes (nodes, depth, unpacked bytes, rows, entries): 413."""

    code = Code.IMPORT_TOO_LARGE


@dataclass(frozen=True)
class ImportLimits:
    """One file's budget, from the settings (docs/design.md §27)."""

    nodes: int  # conversations, tree nodes or database rows
    depth: int  # nodes on one path of a conversation tree
    branches: int  # branch sessions made
    entries: int  # entries written, a branch's copy of its shared prefix included
    unpacked_bytes: int  # bytes read out of a zip or a database
    json_values: int  # JSON values in the file, counted before it is parsed (JsonBudget)

    @classmethod
    def from_settings(cls) -> ImportLimits:
        return cls(
            nodes=settings.IMPORT_MAX_NODES,
            depth=settings.IMPORT_MAX_DEPTH,
            branches=settings.IMPORT_MAX_BRANCHES,
            entries=settings.IMPORT_MAX_ENTRIES,
            unpacked_bytes=settings.IMPORT_MAX_UNPACKED_BYTES,
            json_values=settings.IMPORT_MAX_JSON_VALUES,
        )


# Python keeps each parsed JSON value as an object of 50-200 bytes: 100 MB of `[[],[],…]`
# became 33 million lists and 5 GB. So a file's values are counted before `json.loads` sees
# them, against IMPORT_MAX_JSON_VALUES (3 million by default: a few hundred MB parsed at
# most).
_JSON_VALUE_MARKS = (b",", b"[", b"{")


class JsonBudget:
    """The JSON values of a file, counted as its bytes arrive (a zip's as they unpack):
    every value but the first of an array or an object follows a comma, and every array or
    object opens with a bracket. Commas and brackets inside strings count too — an estimate
    from above, a few C scans of each chunk, nothing copied."""

    def __init__(self, limits: ImportLimits, what: str):
        self.limit = limits.json_values
        self.what = what
        self.counted = 0

    def take(self, chunk: bytes | bytearray | str) -> None:
        if isinstance(chunk, str):
            self.counted += chunk.count(",") + chunk.count("[") + chunk.count("{")
        else:
            self.counted += sum(chunk.count(mark) for mark in _JSON_VALUE_MARKS)
        if self.counted > self.limit:
            raise ImportTooLarge(
                f"{self.what} holds more than IMPORT_MAX_JSON_VALUES ({self.limit}) JSON values"
            )


@dataclass
class ForeignBranch:
    """Another path of a conversation tree: `entries` from the root to its leaf; it leaves
    the path of `parent` (an index into the conversation's branches, -1 for its main path)
    somewhere, and holds the prefix they share as that session does."""

    source_id: str
    entries: list[NewEntry]
    parent: int = -1
    notes: list[str] = field(default_factory=list)


@dataclass
class ForeignConversation:
    source_id: str
    created_at: datetime
    title: str
    model: str
    main: list[NewEntry]
    branches: list[ForeignBranch] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    # Why the whole conversation is left out (a second one with the same id in the file).
    error: str = ""
    # Branches not read: over the file's branch or entry budget (`left_out_why` says which).
    left_out: int = 0
    left_out_why: str = ""


@dataclass
class ForeignFile:
    conversations: list[ForeignConversation]
    # How many entries the import may write (IMPORT_MAX_ENTRIES, and at most
    # ENTRIES_PER_NODE per node of the file, so that what it writes grows with the file).
    entries_budget: int
    # Tree nodes visited while reading: linear in the file (tests count it).
    nodes_walked: int = 0


# A branch is stored as a copy of the prefix it shares with its parent, then its own
# entries: a tree of many forks deep down costs far more entries than nodes. An import writes
# at most this many entries per node of the file.
ENTRIES_PER_NODE = 4


class Dropped:
    """Counts what a conversation lost on the way in, for the report."""

    def __init__(self):
        self.counts: dict[str, int] = {}

    def add(self, what: str, count: int = 1) -> None:
        self.counts[what] = self.counts.get(what, 0) + count

    def notes(self) -> list[str]:
        return [f"{count} {what} dropped" for what, count in sorted(self.counts.items())]


def storable(text: str, dropped: Dropped) -> str:
    """The text without NUL and lone surrogates (no database keeps them), counted."""
    if _UNSTORABLE.search(text) is None:
        return text
    cleaned, removed = _UNSTORABLE.subn("", text)
    dropped.add("NUL or lone surrogate character(s)", removed)
    return cleaned


def stored_id(value: str) -> str:
    """An id as a column keeps it: itself when it fits and is storable, else `sha256:` and
    the digest of it (the same id always gives the same digest: imports stay idempotent)."""
    if len(value) <= ID_MAX_CHARS and _UNSTORABLE.search(value) is None:
        return value
    return "sha256:" + hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()


def moment(value: Any) -> datetime:
    """A time as exports write it: seconds since 1970 (a number or its text) or ISO 8601
    (UTC when it names no zone); anything else is 1970."""
    if isinstance(value, bool):
        return _EPOCH
    try:
        if isinstance(value, int | float):
            return datetime.fromtimestamp(value, tz=UTC)
        if isinstance(value, str):
            try:
                return datetime.fromtimestamp(float(value), tz=UTC)
            except ValueError:
                parsed = datetime.fromisoformat(value.strip())
                return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
    except (ValueError, OverflowError, OSError):
        pass
    return _EPOCH


def kind_of(value: Any) -> str:
    """How a JSON value is named in an error: 'an array', 'a string', …"""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    return {dict: "an object", list: "an array", str: "a string"}.get(type(value), "a number")


def quoted(text: str, limit: int = 40) -> str:
    """An id from the file as an error message quotes it, shortened."""
    return repr(text if len(text) <= limit else text[:limit] + "…")
