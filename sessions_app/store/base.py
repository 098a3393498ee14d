"""The store protocol (docs/design.md §4): plain dataclasses in and out, synchronous.

Both backends (`db`, `jsonl`) implement `SessionStore`; services and the runtime talk to the
protocol and only `get_store()` knows which backend is in use. Everything that differs
between backends is behind it: the conversation, the per-session lock (`locked`), the turn
lease (`turn_lease`, `request_turn_abort`), the incarnation fence, and the removal of all a
session has on `delete`. What is rows of the database under every backend has a module of
its own in this package: the connection registry (connections.py) and tool approval
requests (approvals.py).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

from jarvis_site.shared.errors import Code, DomainError, detail_of
from sessions_app.core.ids import InvalidSessionId  # re-exported: stores raise it for bad ids
from sessions_app.store.search import SearchHit  # re-exported: what `search` returns

if TYPE_CHECKING:
    from sessions_app.store.lease import TurnLeaseBackend

__all__ = [
    "AgentMismatch",
    "CorruptSessionFile",
    "EntryRecord",
    "InvalidSessionId",
    "NewEntry",
    "Notice",
    "SearchHit",
    "SessionMeta",
    "SessionExists",
    "SessionNotFound",
    "SessionStore",
    "StoreError",
]

ENTRY_KINDS_SENT_TO_MODELS = {"message", "compaction"}
# The schema version every entry carries (docs/design.md §20). The store writes the current
# one on append; entries stored before versions existed read as 1. Readers act only on the
# versions they know: an entry of a newer version is stored, listed and exported as it is,
# but never reaches a model (history.py) nor a timeline or a replayed request.
ENTRY_SCHEMA_VERSION = 1
ENTRY_VERSIONS_KNOWN = frozenset({1})


TITLE_MAX = 200  # Session.title's length
THINKING_LEVELS = ("off", "low", "medium", "high")


class StoreError(Exception):
    """Base of every error a store raises on purpose."""


class SessionNotFound(StoreError, DomainError):
    """No such session, or not the caller's: the same answer (404 not_found)."""

    code = Code.NOT_FOUND

    @property
    def detail(self) -> str:
        return detail_of(self.code)  # raised with the id alone, which the caller knows


class AgentMismatch(StoreError, DomainError):
    """`create` of an existing id with another agent (the API answers 409 agent_mismatch)."""

    code = Code.AGENT_MISMATCH

    def __init__(self, session_id: str, existing: str, requested: str):
        super().__init__(f"session {session_id!r} belongs to agent {existing!r}, not {requested!r}")
        self.session_id = session_id
        self.existing = existing
        self.requested = requested


class SessionExists(StoreError):
    """A branch was asked to use an id that is already taken."""


class CorruptSessionFile(StoreError):
    """A jsonl file is damaged somewhere other than a torn last line."""

    def __init__(self, path, line: int, reason: str):
        super().__init__(f"{path}:{line}: {reason}")
        self.path = path
        self.line = line


@dataclass(frozen=True)
class SessionMeta:
    id: str
    agent: str
    owner_id: int | None
    title: str
    parent_id: str | None
    branched_at_seq: int | None
    created_at: datetime
    updated_at: datetime
    last_seq: int
    # A new token each time the id is created (see `fenced`).
    incarnation: str = ""
    model: str = ""  # "" = the agent's model, else JARVIS_MODEL
    spawned_by: str | None = None  # the calling session of a sub-agent session
    thinking: str = "off"  # off | low | medium | high (THINKING_LEVELS)
    pinned: bool = False  # listed before the others (docs/design.md §24)
    archived: bool = False  # left out of the list unless asked for


@dataclass(frozen=True)
class NewEntry:
    """What a caller hands to `append`; the store adds `seq` and `created_at`."""

    kind: str = "message"
    role: str = ""
    content: str = ""
    tool_calls: list[dict[str, Any]] | None = None
    tool_call_id: str = ""
    name: str = ""
    is_error: bool = False
    model: str = ""
    usage: dict[str, Any] | None = None
    turn_id: str = ""
    data: dict[str, Any] | None = None

    def __post_init__(self):
        if not self.kind or not isinstance(self.kind, str):
            raise ValueError("an entry needs a kind")
        if self.kind == "message" and self.role not in {"user", "assistant", "tool"}:
            raise ValueError(
                f"a message entry's role is user, assistant or tool, not {self.role!r}"
            )
        for call in self.tool_calls or ():
            if (
                not isinstance(call.get("arguments"), str)
                or not call.get("id")
                or not call.get("name")
            ):
                raise ValueError(
                    "a tool call is {id, name, arguments} with arguments a JSON string"
                )


@dataclass(frozen=True)
class EntryRecord:
    session_id: str
    seq: int
    kind: str
    role: str
    content: str
    tool_calls: list[dict[str, Any]] | None
    tool_call_id: str
    name: str
    is_error: bool
    model: str
    usage: dict[str, Any] | None
    turn_id: str
    data: dict[str, Any] | None
    created_at: datetime
    v: int = ENTRY_SCHEMA_VERSION  # the entry's schema version (see ENTRY_SCHEMA_VERSION)

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["created_at"] = self.created_at.isoformat()
        return out


_new_object = object.__new__
_set_attribute = object.__setattr__


def record_from_fields(fields: dict[str, Any]) -> EntryRecord:
    """An EntryRecord from a dict holding exactly its fields, for the stores' hot paths.

    A frozen dataclass's __init__ pays one object.__setattr__ per field; for 14 fields that
    was a third of the time spent loading a 2,000-entry history. Setting the instance dict
    once gives the same immutable record at half the cost. Callers pass every field,
    the schema version `v` included.
    """
    record = _new_object(EntryRecord)
    _set_attribute(record, "__dict__", fields)
    return record


@dataclass(frozen=True)
class Notice:
    session_id: str
    message_id: str
    content: str
    created_at: datetime
    delivered_at: datetime | None = None


def new_incarnation() -> str:
    return uuid.uuid4().hex


class SessionStore(Protocol):
    """The store protocol.

    Writes that a turn makes pass the `incarnation` the turn started on: the write is refused
    with SessionNotFound when the session was deleted since (and perhaps created again under
    the same id, even by another user). `fenced` gives the same guarantee to writes outside
    the store (memory rows): inside the block the session cannot be deleted.
    """

    def create(
        self,
        session_id: str,
        agent: str = "jarvis",
        owner_id: int | None = None,
        title: str = "",
        spawned_by: str | None = None,
    ) -> SessionMeta: ...

    def get_meta(self, session_id: str) -> SessionMeta | None: ...

    def set_title(
        self, session_id: str, title: str, incarnation: str | None = None
    ) -> SessionMeta: ...

    def set_model(self, session_id: str, model: str) -> SessionMeta: ...

    def set_thinking(self, session_id: str, thinking: str) -> SessionMeta: ...

    def set_flags(
        self, session_id: str, *, pinned: bool | None = None, archived: bool | None = None
    ) -> SessionMeta:
        """Pin/unpin and archive/unarchive (None leaves a flag as it is); not activity:
        `updated_at` stays."""
        ...

    def list(
        self,
        owner_id: int | None = None,
        agent: str | None = None,
        include_tests: bool = True,
        include_subagents: bool = True,
        archived: bool | None = None,
    ) -> list[SessionMeta]: ...

    def get_messages(
        self, session_id: str, after_seq: int = 0, limit: int | None = None
    ) -> list[EntryRecord]: ...

    def get_context_entries(self, session_id: str) -> list[EntryRecord]:
        """The entries from the latest compaction's `first_kept_seq` on (the compaction
        entry among them), in seq order; every entry when there is no compaction. All a
        turn reads to build its context: the cost does not grow with what was compacted
        (docs/design.md §22)."""
        ...

    def append(
        self, session_id: str, entries: list[NewEntry], incarnation: str | None = None
    ) -> list[EntryRecord]: ...

    def fenced(self, session_id: str, incarnation: str) -> AbstractContextManager[None]: ...

    def locked(
        self, session_id: str, *, agent: str = "jarvis", owner_id: int | None = None
    ) -> AbstractContextManager[bool]:
        """A database transaction holding the session's lock; yields whether one is held.

        Deleting a session and attaching a connection to it take this lock, so that each
        sees the other whole. Whether a session with no data yet can be locked is the
        backend's (`agent` and `owner_id` are for a backend that needs a row to lock).
        """
        ...

    def delete(self, session_id: str) -> bool:
        """Remove the session and everything it has in the store — entries, notices, its
        connection rows and approval requests; False when it did not exist. Its branches
        stay, without a parent."""
        ...

    def get_turn_tail(self, session_id: str, up_to_seq: int | None) -> list[EntryRecord]:
        """The entries from the last turn's start (or, without turn markers, the last
        exchange's) up to `up_to_seq`, in seq order: all that a pairing repair looks at.
        `None` reads up to the last entry stored, which on jsonl may be ahead of the meta
        file's `last_seq` after a crash."""
        ...

    def create_branch(
        self,
        source_id: str,
        new_id: str | None = None,
        at_seq: int | None = None,
        owner_id: int | None = None,
        closing: Sequence[NewEntry] = (),
        incarnation: str | None = None,
    ) -> SessionMeta:
        """Copy the source up to `at_seq` (default: all) into a new session with the same
        seqs, then append `closing` to the copy, as one step: the branch is seen whole or
        not at all. The copy records `parent_id` and `branched_at_seq` and is independent
        afterwards. SessionNotFound when the source is missing (or is no longer
        `incarnation`), SessionExists for a taken `new_id`, ValueError for a cut outside
        the history."""
        ...

    def turn_lease(self, session_id: str, owner_id: int | None = None) -> TurnLeaseBackend:
        """This backend's half of a turn lease on the session, not yet acquired; with
        `owner_id`, of that owner's session only (SessionNotFound otherwise)."""
        ...

    def request_turn_abort(self, session_id: str) -> bool:
        """Mark the session's held turn lease for abort; False when no turn holds it."""
        ...

    def append_proactive(
        self, session_id: str, message_id: str, content: str, incarnation: str | None = None
    ) -> tuple[Notice, bool]: ...

    def get_proactive(self, session_id: str) -> list[Notice]: ...

    def get_proactive_owned(self, sessions: Mapping[str, int]) -> dict[str, list[Notice]]:
        """The notices of every session in `sessions` (id -> owner id) that still belongs to
        that owner, in one read; sessions without notices are left out."""
        ...

    def mark_proactive_delivered(
        self, session_id: str, message_id: str, delivered_at: datetime
    ) -> Notice | None:
        """Record the first delivery of a notice (a later one keeps the first time).

        Returns the notice, or None when the session or the notice does not exist.
        """
        ...

    def search(
        self, owner_id: int, query: str, limit: int = 20, offset: int = 0
    ) -> list[SearchHit]:
        """The owner's user and assistant messages matching `query` (websearch syntax),
        best rank first, then newest; `limit` hits from `offset`."""
        ...
