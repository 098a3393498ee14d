"""Histories kept by other tools, read as this project's entries (docs/design.md §21).

Two formats: ChatGPT's data export (`conversations.json`: each conversation a tree of nodes
`{id, message, parent, children}` and a `current_node`) and an openai-agents `SQLiteSession`
database (tables `agent_sessions` and `agent_messages`, one Responses API item as JSON per
row). Each conversation becomes a ForeignConversation: the path that was shown last (its
`main` entries) and, for ChatGPT, every other path of its tree (`branches`), each with the
notes of what could not be carried over. Pure reading: nothing here writes.
"""

from __future__ import annotations

import io
import json
import re
import sqlite3
import zipfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sessions_app.store import NewEntry

SQLITE_MAGIC = b"SQLite format 3\x00"
# A tool name both providers accept; ChatGPT's recipients ("dalle.text2im") have dots.
_TOOL_NAME_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


class ForeignFormatInvalid(ValueError):
    """The file is not what it was said to be; nothing was imported."""

    def __init__(self, code: str, detail: str):
        super().__init__(detail)
        self.code = code


@dataclass
class ForeignBranch:
    source_id: str
    entries: list[NewEntry]
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


class _Dropped:
    """Counts what a conversation lost on the way in, for the report."""

    def __init__(self):
        self.counts: dict[str, int] = {}

    def add(self, what: str) -> None:
        self.counts[what] = self.counts.get(what, 0) + 1

    def notes(self) -> list[str]:
        return [f"{count} {what} dropped" for what, count in sorted(self.counts.items())]


def _tool_name(name: str) -> str:
    return _TOOL_NAME_UNSAFE.sub("_", name or "tool")[:64] or "tool"


def _arguments(text: str, key: str) -> str:
    """A call's arguments as a JSON object string: the text itself when it is one."""
    try:
        if isinstance(json.loads(text), dict):
            return text
    except ValueError:
        pass
    return json.dumps({key: text}, ensure_ascii=False)


# --- ChatGPT ----------------------------------------------------------------------------------


def _chatgpt_conversations(raw: bytes) -> list[dict]:
    """The list of conversations of an export: the JSON file itself, or the export's zip."""
    not_chatgpt = "not_a_chatgpt_export"
    if raw[:2] == b"PK":
        try:
            with zipfile.ZipFile(io.BytesIO(raw)) as archive:
                name = next(
                    (n for n in archive.namelist() if n.rsplit("/", 1)[-1] == "conversations.json"),
                    None,
                )
                if name is None:
                    raise ForeignFormatInvalid(not_chatgpt, "the zip has no conversations.json")
                raw = archive.read(name)
        except zipfile.BadZipFile as error:
            raise ForeignFormatInvalid(not_chatgpt, f"a damaged zip: {error}") from error
    try:
        conversations = json.loads(raw)
    except (UnicodeDecodeError, ValueError) as error:
        raise ForeignFormatInvalid(not_chatgpt, f"not JSON: {error}") from error
    if not isinstance(conversations, list) or not all(
        isinstance(c, dict)
        and isinstance(c.get("mapping"), dict)
        and all(isinstance(node, dict) for node in c["mapping"].values())
        for c in conversations
    ):
        raise ForeignFormatInvalid(
            not_chatgpt,
            "a ChatGPT conversations.json is a list of conversations, each with a mapping of nodes",
        )
    return conversations


def _text_parts(content: dict, dropped: _Dropped) -> str:
    if "parts" not in content:
        return str(content.get("text") or "")
    texts = []
    for part in content.get("parts") or ():
        if isinstance(part, str):
            texts.append(part)
        elif isinstance(part, dict) and isinstance(part.get("text"), str):
            texts.append(part["text"])
        else:
            dropped.add("image or file attachment(s)")
    return "\n".join(text for text in texts if text)


class _ChatGptPath:
    """One path of a conversation tree, root to leaf, made into entries."""

    def __init__(self, dropped: _Dropped):
        self.entries: list[NewEntry] = []
        self.dropped = dropped
        self.waiting: list[dict] = []  # calls made, not yet answered

    def add(self, message: dict) -> None:
        author = message.get("author") or {}
        role = author.get("role")
        metadata = message.get("metadata") or {}
        content = message.get("content") or {}
        content_type = content.get("content_type", "text")
        if role == "system":
            return  # the model's instructions, not the conversation
        if metadata.get("is_visually_hidden_from_conversation"):
            return
        if content_type in ("thoughts", "reasoning_recap"):
            self.dropped.add("reasoning message(s)")
            return
        text = _text_parts(content, self.dropped)
        if role == "user":
            if content_type == "user_editable_context":
                return  # custom instructions: settings, not something said
            if text.strip():
                self.entries.append(NewEntry(role="user", content=text))
            return
        if role == "assistant":
            self._assistant(message, text, content_type, metadata)
            return
        if role == "tool":
            self._tool(author, text)
            return
        self.dropped.add(f"message(s) of role {role!r}")

    def _assistant(self, message: dict, text: str, content_type: str, metadata: dict) -> None:
        model = str(metadata.get("model_slug") or "")
        recipient = message.get("recipient") or "all"
        if recipient == "all" and content_type != "code":
            if text.strip():
                self.entries.append(NewEntry(role="assistant", content=text, model=model))
            return
        # Code for the interpreter or a call to a built-in tool: a tool call, answered by the
        # tool messages that follow it.
        name = _tool_name(recipient if recipient != "all" else "python")
        call = {
            "id": str(message.get("id") or f"call_{len(self.entries)}"),
            "name": name,
            "arguments": _arguments(text, "code" if content_type == "code" else "input"),
        }
        self.waiting = [call]
        self.entries.append(NewEntry(role="assistant", tool_calls=[call], model=model))

    def _tool(self, author: dict, text: str) -> None:
        if not self.waiting:
            self.dropped.add("tool message(s) that answer no call")
            return
        call = self.waiting.pop(0)
        self.entries.append(
            NewEntry(
                role="tool",
                tool_call_id=call["id"],
                name=call["name"],
                content=text or f"({author.get('name') or call['name']} gave no text)",
            )
        )


def _path_to(mapping: dict, node_id: str) -> list[dict]:
    """The nodes from the root to `node_id`."""
    path = []
    seen = set()
    while node_id in mapping and node_id not in seen:
        seen.add(node_id)
        path.append(mapping[node_id])
        node_id = mapping[node_id].get("parent")
    return path[::-1]


def _entries_of(nodes: Iterable[dict], dropped: _Dropped) -> list[NewEntry]:
    path = _ChatGptPath(dropped)
    for node in nodes:
        if node.get("message"):
            path.add(node["message"])
    return path.entries


def _shown_leaf(conversation: dict) -> str:
    """The node the conversation was left at: `current_node`, or, in an export without
    one, the leaf written last."""
    mapping = conversation["mapping"]
    if conversation.get("current_node") in mapping:
        return conversation["current_node"]

    def written(node_id: str) -> float:
        message = mapping[node_id].get("message") or {}
        return float(message.get("create_time") or 0)

    leaves = [node_id for node_id, node in mapping.items() if not node.get("children")]
    return max(leaves, key=written, default="")


def _moment(value: Any) -> datetime:
    try:
        return datetime.fromtimestamp(float(value), tz=UTC)
    except (TypeError, ValueError, OverflowError):
        return datetime.fromtimestamp(0, tz=UTC)


def chatgpt_read(raw: bytes) -> list[ForeignConversation]:
    """Every conversation of a ChatGPT export; ForeignFormatInvalid for anything else."""
    conversations = []
    for conversation in _chatgpt_conversations(raw):
        mapping = conversation["mapping"]
        source_id = str(conversation.get("conversation_id") or conversation.get("id") or "")
        if not source_id:
            raise ForeignFormatInvalid("not_a_chatgpt_export", "a conversation without an id")
        dropped = _Dropped()
        main_nodes = _path_to(mapping, _shown_leaf(conversation))
        main = _entries_of(main_nodes, dropped)
        on_main = {node.get("id") for node in main_nodes}
        leaves = [
            node_id
            for node_id, node in mapping.items()
            if not node.get("children") and node_id not in on_main
        ]
        branches = []
        for leaf in sorted(leaves):
            branch_dropped = _Dropped()
            entries = _entries_of(_path_to(mapping, leaf), branch_dropped)
            branches.append(ForeignBranch(f"{source_id}:{leaf}", entries, branch_dropped.notes()))
        model = next((entry.model for entry in reversed(main) if entry.model), "")
        conversations.append(
            ForeignConversation(
                source_id=source_id,
                created_at=_moment(conversation.get("create_time")),
                title=str(conversation.get("title") or "")[:200],
                model=model,
                main=main,
                branches=branches,
                notes=dropped.notes(),
            )
        )
    return conversations


# --- openai-agents ------------------------------------------------------------------------------


def _item_text(content: Any, dropped: _Dropped) -> str:
    if isinstance(content, str):
        return content
    texts = []
    for part in content or ():
        if isinstance(part, dict) and part.get("type") in ("input_text", "output_text", "text"):
            texts.append(str(part.get("text") or ""))
        elif isinstance(part, dict) and part.get("type") == "refusal":
            texts.append(str(part.get("refusal") or ""))
        else:
            dropped.add("image, audio or file part(s)")
    return "\n".join(text for text in texts if text)


def _agents_entries(items: Iterable[dict], dropped: _Dropped) -> list[NewEntry]:
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
            call_id = str(item.get("call_id") or item.get("id") or "")
            names[call_id] = _tool_name(str(item.get("name") or ""))
            arguments = item.get("arguments")
            pending["calls"].append(
                {
                    "id": call_id,
                    "name": names[call_id],
                    "arguments": arguments if isinstance(arguments, str) else "{}",
                }
            )
        elif kind == "function_call_output":
            flush()
            call_id = str(item.get("call_id") or "")
            output = item.get("output")
            entries.append(
                NewEntry(
                    role="tool",
                    tool_call_id=call_id,
                    name=names.get(call_id, "tool"),
                    content=output if isinstance(output, str) else _item_text(output, dropped),
                )
            )
        elif kind == "reasoning":
            dropped.add("reasoning item(s)")
        else:
            dropped.add(f"{kind or 'unknown'} item(s)")
    flush()
    return entries


def _sqlite_moment(text: Any) -> datetime:
    try:
        return datetime.fromisoformat(str(text)).replace(tzinfo=UTC)
    except ValueError:
        return datetime.fromtimestamp(0, tz=UTC)


def openai_agents_read(path: Path) -> list[ForeignConversation]:
    """Every session of an openai-agents SQLiteSession database (default table names);
    ForeignFormatInvalid for any other file."""
    not_agents = "not_an_openai_agents_database"
    with path.open("rb") as file:
        if file.read(len(SQLITE_MAGIC)) != SQLITE_MAGIC:
            raise ForeignFormatInvalid(not_agents, "not an SQLite database")
    try:
        connection = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    except sqlite3.Error as error:
        raise ForeignFormatInvalid(not_agents, f"unreadable: {error}") from error
    try:
        tables = {row[0] for row in connection.execute("SELECT name FROM sqlite_master")}
        if not {"agent_sessions", "agent_messages"} <= tables:
            raise ForeignFormatInvalid(
                not_agents,
                "an SQLiteSession database has the tables agent_sessions and agent_messages",
            )
        sessions = connection.execute(
            "SELECT session_id, created_at FROM agent_sessions ORDER BY created_at, session_id"
        ).fetchall()
        conversations = []
        for session_id, created_at in sessions:
            dropped = _Dropped()
            items = []
            for (data,) in connection.execute(
                "SELECT message_data FROM agent_messages WHERE session_id = ? ORDER BY id",
                (session_id,),
            ):
                try:
                    item = json.loads(data)
                except ValueError:
                    dropped.add("unreadable item(s)")
                    continue
                if isinstance(item, dict):
                    items.append(item)
                else:
                    dropped.add("unreadable item(s)")
            main = _agents_entries(items, dropped)
            conversations.append(
                ForeignConversation(
                    source_id=str(session_id),
                    created_at=_sqlite_moment(created_at),
                    title=str(session_id)[:200],
                    model="",
                    main=main,
                    notes=dropped.notes(),
                )
            )
        return conversations
    except sqlite3.DatabaseError as error:
        raise ForeignFormatInvalid(not_agents, f"unreadable: {error}") from error
    finally:
        connection.close()
