"""An openai-agents `SQLiteSession` database read as this project's entries (docs/design.md
§21, §27): tables `agent_sessions` and `agent_messages`, one Responses API item as JSON per
row.

The file comes from someone else, and SQLite runs what a schema says: a view, a trigger or a
generated column can make a few KiB cost minutes and gigabytes. So it is opened read-only
and immutable, with `trusted_schema` off (the schema may call no function with side
effects), only real tables and plain columns are read (an `agent_messages` view, or a
generated `message_data`, is refused), the items' JSON values are counted before any is
parsed (base.JsonBudget), every value is
capped at IMPORT_MAX_UNPACKED_BYTES, rows and bytes are counted against the budget as they
arrive, and a progress handler stops the reading after STEPS_PER_ROW virtual-machine steps
per row the budget allows.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable
from pathlib import Path
from typing import Any
from urllib.parse import quote

from sessions_app.formats.base import (
    ENTRIES_PER_NODE,
    TITLE_MAX_CHARS,
    Dropped,
    ForeignConversation,
    ForeignFile,
    ImportLimits,
    ImportTooLarge,
    JsonBudget,
    NotAnOpenAIAgentsDatabase,
    moment,
    storable,
    stored_id,
)
from sessions_app.formats.chatgpt import call_arguments, tool_name
from sessions_app.store import NewEntry

SQLITE_MAGIC = b"SQLite format 3\x00"
TABLES = ("agent_sessions", "agent_messages")
# The progress handler runs every PROGRESS_EVERY virtual-machine steps; a read that takes
# more than STEPS_PER_ROW for each row the file may hold (IMPORT_MAX_NODES) is stopped:
# reading rows in order takes a few dozen steps each, a schema or a query made to explode
# far more.
PROGRESS_EVERY = 1_000
STEPS_PER_ROW = 5_000


def _item_text(content: Any, dropped: Dropped) -> str:
    if isinstance(content, str):
        return storable(content, dropped)
    if not isinstance(content, list):
        if content is not None:
            dropped.add("unreadable content part(s)")
        return ""
    texts = []
    for part in content:
        if isinstance(part, dict) and part.get("type") in ("input_text", "output_text", "text"):
            texts.append(str(part.get("text") or ""))
        elif isinstance(part, dict) and part.get("type") == "refusal":
            texts.append(str(part.get("refusal") or ""))
        else:
            dropped.add("image, audio or file part(s)")
    return storable("\n".join(text for text in texts if text), dropped)


def _agents_entries(items: Iterable[dict], dropped: Dropped) -> list[NewEntry]:
    """Responses API items as entries: function_call items join the assistant message they
    follow (or make one), each function_call_output becomes the tool result of its call."""
    entries: list[NewEntry] = []
    pending: dict[str, Any] | None = None  # an assistant message still taking calls
    names: dict[str, str] = {}

    def flush() -> None:
        nonlocal pending
        if pending is not None and (pending["content"].strip() or pending["calls"]):
            entries.append(
                NewEntry(
                    role="assistant",
                    content=pending["content"],
                    tool_calls=pending["calls"] or None,
                )
            )
        pending = None

    for item in items:
        kind = item.get("type") or ("message" if "role" in item else "")
        kind = kind if isinstance(kind, str) else ""
        role = item.get("role")
        if kind == "message" and role == "user":
            flush()
            text = _item_text(item.get("content"), dropped)
            if text.strip():
                entries.append(NewEntry(role="user", content=text))
        elif kind == "message" and role == "assistant":
            flush()
            pending = {"content": _item_text(item.get("content"), dropped), "calls": []}
        elif kind == "message" and role in ("system", "developer"):
            continue  # the agent's instructions, not the conversation
        elif kind == "function_call":
            if pending is None:
                pending = {"content": "", "calls": []}
            call_id = stored_id(str(item.get("call_id") or item.get("id") or ""))
            names[call_id] = tool_name(str(item.get("name") or ""))
            arguments = item.get("arguments")
            pending["calls"].append(
                {
                    "id": call_id,
                    "name": names[call_id],
                    "arguments": call_arguments(storable(arguments, dropped), "input")
                    if isinstance(arguments, str)
                    else "{}",
                }
            )
        elif kind == "function_call_output":
            flush()
            call_id = stored_id(str(item.get("call_id") or ""))
            output = item.get("output")
            entries.append(
                NewEntry(
                    role="tool",
                    tool_call_id=call_id,
                    name=names.get(call_id, "tool"),
                    content=_item_text(output, dropped),
                )
            )
        elif kind == "reasoning":
            dropped.add("reasoning item(s)")
        else:
            dropped.add(f"{kind[:40] or 'unknown'} item(s)")
    flush()
    return entries


def _connect(path: Path, limits: ImportLimits) -> sqlite3.Connection:
    """The file opened read-only and immutable (nothing written, no journal, no lock), with
    the schema untrusted, values capped and the reading stopped past its step budget."""
    uri = f"file:{quote(str(path.resolve()))}?mode=ro&immutable=1"
    connection = sqlite3.connect(uri, uri=True, isolation_level=None)
    connection.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, max(limits.unpacked_bytes, 1024))
    connection.execute("PRAGMA trusted_schema = OFF")
    steps = 0
    max_steps = STEPS_PER_ROW * limits.nodes

    def over_budget() -> bool:
        nonlocal steps
        steps += PROGRESS_EVERY
        return steps > max_steps  # true: SQLite interrupts the statement

    connection.set_progress_handler(over_budget, PROGRESS_EVERY)
    return connection


class _Budget:
    """Rows and bytes read so far, against the file's caps."""

    def __init__(self, limits: ImportLimits):
        self.limits = limits
        self.rows = 0
        self.bytes = 0

    def take(self, value: Any) -> None:
        self.rows += 1
        self.bytes += len(value) if isinstance(value, str | bytes) else 8
        if self.rows > self.limits.nodes:
            raise ImportTooLarge(
                f"the database has more than IMPORT_MAX_NODES ({self.limits.nodes}) rows"
            )
        if self.bytes > self.limits.unpacked_bytes:
            raise ImportTooLarge(
                "the database holds more than IMPORT_MAX_UNPACKED_BYTES "
                f"({self.limits.unpacked_bytes} bytes) of items"
            )


def _item(data: Any, dropped: Dropped) -> dict | None:
    try:
        item = json.loads(data)
    except (TypeError, ValueError, RecursionError):
        item = None
    if not isinstance(item, dict):
        dropped.add("unreadable item(s)")
        return None
    return item


# What `PRAGMA table_xinfo` says of a column in its `hidden` field: 0 for a plain one, 1 for
# a virtual table's hidden column, 2 and 3 for a generated one (computed when read, or when
# written by whoever wrote the file).
PLAIN_COLUMN = 0
READ_COLUMNS = {
    "agent_sessions": ("session_id", "created_at"),
    "agent_messages": ("id", "session_id", "message_data"),
}


def _plain_columns_only(connection: sqlite3.Connection) -> None:
    """Refuse a file whose columns read here are not plain stored values: a generated
    column is an expression SQLite evaluates on every read (a 20 KB file whose
    `message_data` was one expanded into gigabytes)."""
    for table, columns in READ_COLUMNS.items():
        hidden = {
            name: flag
            for _, name, _, _, _, _, flag in connection.execute(f"PRAGMA table_xinfo({table})")
        }
        for column in columns:
            if hidden.get(column, PLAIN_COLUMN) != PLAIN_COLUMN:
                raise NotAnOpenAIAgentsDatabase(
                    f"{table}.{column} is a generated column; an SQLiteSession database "
                    "stores its values"
                )


def openai_agents_read(path: Path, limits: ImportLimits) -> ForeignFile:
    """Every session of an openai-agents SQLiteSession database (default table names);
    NotAnOpenAIAgentsDatabase for any other file, ImportTooLarge past the budget."""
    with path.open("rb") as file:
        if file.read(len(SQLITE_MAGIC)) != SQLITE_MAGIC:
            raise NotAnOpenAIAgentsDatabase("not an SQLite database")
    try:
        connection = _connect(path, limits)
    except sqlite3.Error as error:
        raise NotAnOpenAIAgentsDatabase(f"unreadable: {error}") from error
    budget = _Budget(limits)
    values = JsonBudget(limits, "agent_messages")
    try:
        # A virtual table is listed as a table too; its module, not rows, answers a read.
        kinds = {
            name: "virtual table"
            if (sql or "").lstrip().upper().startswith("CREATE VIRTUAL")
            else kind
            for name, kind, sql in connection.execute(
                "SELECT name, type, sql FROM sqlite_master WHERE name IN (?, ?)", TABLES
            )
        }
        for table in TABLES:
            if kinds.get(table) != "table":
                found = f"a {kinds[table]}" if table in kinds else "missing"
                raise NotAnOpenAIAgentsDatabase(
                    "an SQLiteSession database has the tables agent_sessions and "
                    f"agent_messages; {table} is {found}"
                )
        _plain_columns_only(connection)
        sessions = []
        for session_id, created_at in connection.execute(
            "SELECT session_id, created_at FROM agent_sessions ORDER BY created_at, session_id"
        ):
            budget.take(session_id)
            sessions.append((str(session_id), created_at))
        # One ordered read of every item (not a query per session: without the SDK's index
        # each would scan the whole table).
        items: dict[str, list[Any]] = {session_id: [] for session_id, _ in sessions}
        for session_id, data in connection.execute(
            "SELECT session_id, message_data FROM agent_messages ORDER BY session_id, id"
        ):
            budget.take(data)
            if isinstance(data, str | bytes):
                values.take(data)
            if (held := items.get(str(session_id))) is not None:
                held.append(data)
    except sqlite3.OperationalError as error:
        if "interrupted" in str(error):
            raise ImportTooLarge(
                f"reading the database took more than {STEPS_PER_ROW} SQLite steps for each "
                f"of the IMPORT_MAX_NODES ({limits.nodes}) rows an import may read"
            ) from error
        raise NotAnOpenAIAgentsDatabase(f"unreadable: {error}") from error
    except sqlite3.DatabaseError as error:
        raise NotAnOpenAIAgentsDatabase(f"unreadable: {error}") from error
    finally:
        connection.close()

    result = ForeignFile(
        conversations=[], entries_budget=min(limits.entries, ENTRIES_PER_NODE * budget.rows)
    )
    first: set[str] = set()
    for session_id, created_at in sessions:
        dropped = Dropped()
        if session_id in first:  # only in a file whose agent_sessions lost its primary key
            result.conversations.append(
                ForeignConversation(
                    source_id=session_id,
                    created_at=moment(created_at),
                    title="",
                    model="",
                    main=[],
                    error="a second session with this id in agent_sessions; its items were "
                    "imported with the first",
                )
            )
            continue
        first.add(session_id)
        parsed = (_item(data, dropped) for data in items[session_id])
        main = _agents_entries((item for item in parsed if item is not None), dropped)
        result.conversations.append(
            ForeignConversation(
                source_id=session_id,
                created_at=moment(created_at),
                title=storable(session_id, dropped)[:TITLE_MAX_CHARS],
                model="",
                main=main,
                notes=dropped.notes(),
            )
        )
    return result
