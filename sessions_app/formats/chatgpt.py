"""ChatGPT's data export read as this project's entries (docs/design.md §21, §27).

`conversations.json` (or the export's zip holding it): a list of conversations, each a tree
of nodes `{id, message, parent, children}` and a `current_node`. The path shown last becomes
the conversation's `main` entries; every other path a branch, stored as a branch of the path
it leaves (so a fork deep down shares its prefix instead of copying a whole path per leaf).

Linear in the file: each node is checked and made into a message once; the tree is walked
once from its roots (parents as the nodes name them: a node in a cycle is never reached);
each branch's entries cost its path's length, counted against the file's entry budget, and
branches over it are left out and counted. A zip is read as a stream, stopped at the
unpacked-size and compression-ratio caps and at the JSON values the file may hold, which are
counted before the parser builds one (base.JsonBudget).
"""

from __future__ import annotations

import io
import json
import re
import zipfile
import zlib
from collections import deque
from dataclasses import dataclass
from typing import Any

from sessions_app.formats.base import (
    ENTRIES_PER_NODE,
    MODEL_MAX_CHARS,
    TITLE_MAX_CHARS,
    Dropped,
    ForeignBranch,
    ForeignConversation,
    ForeignFile,
    ImportLimits,
    ImportTooLarge,
    JsonBudget,
    NotAChatGptExport,
    kind_of,
    moment,
    quoted,
    storable,
    stored_id,
)
from sessions_app.store import NewEntry

# A tool name both providers accept; ChatGPT's recipients ("dalle.text2im") have dots.
_TOOL_NAME_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")
# JSON packs well, but not this well: a zip unpacking to more than this many times its
# compressed size (beyond its first MiB) is a bomb, not an export.
ZIP_MAX_RATIO = 100
ZIP_RATIO_SLACK = 1024 * 1024
_ZIP_CHUNK = 256 * 1024


def tool_name(name: str) -> str:
    return _TOOL_NAME_UNSAFE.sub("_", name or "tool")[:64] or "tool"


def call_arguments(text: str, key: str) -> str:
    """A call's arguments as a JSON object string: the text itself when it is one."""
    try:
        if isinstance(json.loads(text), dict):
            return text
    except (ValueError, RecursionError):
        pass
    return json.dumps({key: text}, ensure_ascii=False)


# --- the file -----------------------------------------------------------------------------------


def _unzipped(raw: bytes, limits: ImportLimits) -> bytearray:
    """The export's conversations.json, read out of its zip a chunk at a time: refused as
    soon as it unpacks past IMPORT_MAX_UNPACKED_BYTES or ZIP_MAX_RATIO, whatever its header
    claims."""
    try:
        with zipfile.ZipFile(io.BytesIO(raw)) as archive:
            member = next(
                (
                    info
                    for info in archive.infolist()
                    if info.filename.rsplit("/", 1)[-1] == "conversations.json"
                ),
                None,
            )
            if member is None:
                raise NotAChatGptExport("the zip has no conversations.json")
            ratio_cap = ZIP_MAX_RATIO * member.compress_size + ZIP_RATIO_SLACK
            values = JsonBudget(limits, member.filename)
            out = bytearray()
            with archive.open(member) as stream:
                while chunk := stream.read(_ZIP_CHUNK):
                    values.take(chunk)
                    out += chunk
                    if len(out) > limits.unpacked_bytes:
                        raise ImportTooLarge(
                            f"{member.filename} unpacks to more than IMPORT_MAX_UNPACKED_BYTES "
                            f"({limits.unpacked_bytes} bytes)"
                        )
                    if len(out) > ratio_cap:
                        raise ImportTooLarge(
                            f"{member.filename} unpacks to more than {ZIP_MAX_RATIO} times its "
                            f"compressed size ({member.compress_size} bytes): not an export"
                        )
            return out  # json.loads reads a bytearray as it is: no second copy
    except (zipfile.BadZipFile, zlib.error, EOFError, NotImplementedError, RuntimeError) as error:
        # RuntimeError: an encrypted member; NotImplementedError: a compression zipfile lacks.
        raise NotAChatGptExport(f"a damaged zip: {error}") from error


def _conversation_list(raw: bytes, limits: ImportLimits) -> list:
    if raw[:2] == b"PK":
        return _parsed(_unzipped(raw, limits))
    if len(raw) > limits.unpacked_bytes:
        raise ImportTooLarge(
            f"the file is larger than IMPORT_MAX_UNPACKED_BYTES ({limits.unpacked_bytes} bytes)"
        )
    JsonBudget(limits, "the file").take(raw)
    return _parsed(raw)


def _parsed(raw: bytes | bytearray) -> list:
    try:
        conversations = json.loads(raw)
    except RecursionError as error:
        raise NotAChatGptExport(
            "the JSON nests deeper than its parser goes (about 1,000 levels): not an export"
        ) from error
    except (UnicodeDecodeError, ValueError) as error:
        raise NotAChatGptExport(f"not JSON: {error}") from error
    if not isinstance(conversations, list):
        raise NotAChatGptExport(
            f"the file holds {kind_of(conversations)}; a ChatGPT conversations.json is a list "
            "of conversations, each with a mapping of nodes"
        )
    return conversations


def _object(value: Any, where: str) -> dict:
    """`value` when it is an object (null reads as an empty one), else a refusal naming where."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise NotAChatGptExport(f"{where} is {kind_of(value)}, not an object")
    return value


def _text(value: Any, where: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise NotAChatGptExport(f"{where} is {kind_of(value)}, not a string")
    return value


# --- messages -------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Message:
    """One node's message, checked and reduced once to what a path needs."""

    message_id: str
    role: str
    content_type: str
    text: str
    recipient: str
    model: str
    author_name: str
    hidden: bool
    attachments: int  # parts that are not text
    written: float  # create_time, as seconds since 1970


def _message(node: dict, where: str, dropped: Dropped) -> _Message | None:
    message = _object(node.get("message"), f"{where}.message")
    if not message:
        return None
    where = f"{where}.message"
    author = _object(message.get("author"), f"{where}.author")
    metadata = _object(message.get("metadata"), f"{where}.metadata")
    content = _object(message.get("content"), f"{where}.content")
    attachments = 0
    if "parts" in content:
        parts = content["parts"]
        if parts is not None and not isinstance(parts, list):
            raise NotAChatGptExport(f"{where}.content.parts is {kind_of(parts)}, not an array")
        texts = []
        for part in parts or ():
            if isinstance(part, str):
                texts.append(part)
            elif isinstance(part, dict) and isinstance(part.get("text"), str):
                texts.append(part["text"])
            else:
                attachments += 1
        text = "\n".join(text for text in texts if text)
    else:
        text = _text(content.get("text"), f"{where}.content.text")
    return _Message(
        message_id=storable(str(message.get("id") or node.get("id") or ""), dropped),
        role=_text(author.get("role"), f"{where}.author.role"),
        content_type=_text(content.get("content_type"), f"{where}.content.content_type") or "text",
        text=storable(text, dropped),
        recipient=_text(message.get("recipient"), f"{where}.recipient") or "all",
        model=storable(str(metadata.get("model_slug") or ""), dropped)[:MODEL_MAX_CHARS],
        author_name=storable(str(author.get("name") or ""), dropped),
        hidden=bool(metadata.get("is_visually_hidden_from_conversation")),
        attachments=attachments,
        written=moment(message.get("create_time")).timestamp(),
    )


class _ChatGptPath:
    """One path of a conversation tree, root to leaf, made into entries."""

    def __init__(self, dropped: Dropped):
        self.entries: list[NewEntry] = []
        self.dropped = dropped
        self.waiting: list[dict] = []  # calls made, not yet answered

    def add(self, message: _Message) -> None:
        role, content_type = message.role, message.content_type
        if role == "system" or message.hidden:
            return  # the model's instructions, or what the page never showed
        if content_type in ("thoughts", "reasoning_recap"):
            self.dropped.add("reasoning message(s)")
            return
        if message.attachments:
            self.dropped.add("image or file attachment(s)", message.attachments)
        if role == "user":
            if content_type != "user_editable_context" and message.text.strip():
                self.entries.append(NewEntry(role="user", content=message.text))
            return
        if role == "assistant":
            self._assistant(message)
            return
        if role == "tool":
            self._tool(message)
            return
        self.dropped.add(f"message(s) of role {role[:40]!r}")

    def _assistant(self, message: _Message) -> None:
        if message.recipient == "all" and message.content_type != "code":
            if message.text.strip():
                self.entries.append(
                    NewEntry(role="assistant", content=message.text, model=message.model)
                )
            return
        # Code for the interpreter or a call to a built-in tool: a tool call, answered by the
        # tool messages that follow it.
        call = {
            "id": stored_id(message.message_id or f"call_{len(self.entries)}"),
            "name": tool_name(message.recipient if message.recipient != "all" else "python"),
            "arguments": call_arguments(
                message.text, "code" if message.content_type == "code" else "input"
            ),
        }
        self.waiting = [call]
        self.entries.append(NewEntry(role="assistant", tool_calls=[call], model=message.model))

    def _tool(self, message: _Message) -> None:
        if not self.waiting:
            self.dropped.add("tool message(s) that answer no call")
            return
        call = self.waiting.pop(0)
        self.entries.append(
            NewEntry(
                role="tool",
                tool_call_id=call["id"],
                name=call["name"],
                content=message.text
                or f"({tool_name(message.author_name or call['name'])} gave no text)",
            )
        )


# --- the tree -------------------------------------------------------------------------------


@dataclass
class _Path:
    """A session's path through the tree: the first `fork` nodes of its parent's path (the
    prefix they share), then its own nodes down to a leaf."""

    parent: int  # index into the conversation's paths; -1 for the main path
    fork: int
    own: list[str]


@dataclass
class _Tree:
    """One conversation, checked, with its paths; every node's message made once."""

    source_id: str
    messages: dict[str, _Message | None]
    paths: list[_Path]
    dropped: Dropped
    unreached: int


def _walk(conversation: dict, limits: ImportLimits, where: str) -> tuple[_Tree, int]:
    """The conversation checked and split into paths; returns it and the nodes visited."""
    mapping = _object(conversation.get("mapping"), f"{where}.mapping")
    dropped = Dropped()
    children: dict[str, list[str]] = {node_id: [] for node_id in mapping}
    messages: dict[str, _Message | None] = {}
    roots = []
    written: dict[str, float] = {}
    for node_id, node in mapping.items():
        node_where = f"{where}.mapping[{quoted(node_id)}]"
        node = _object(node, node_where)
        parent = node.get("parent")
        if parent is not None and not isinstance(parent, str):
            raise NotAChatGptExport(f"{node_where}.parent is {kind_of(parent)}, not a string")
        messages[node_id] = message = _message(node, node_where, dropped)
        if message is not None:
            written[node_id] = message.written
        if parent is None or parent not in mapping or parent == node_id:
            roots.append(node_id)
        else:
            children[parent].append(node_id)
    # Parents say where a node hangs (a `children` list may disagree); the list says in which
    # order the page had them, and so which answer is the newest.
    for node_id, found in children.items():
        listed = mapping[node_id].get("children")
        if len(found) > 1 and isinstance(listed, list):
            order = {child: rank for rank, child in enumerate(listed) if isinstance(child, str)}
            found.sort(key=lambda child: order.get(child, len(order)))

    # Depth of every node reachable from a root, breadth first: one visit each.
    depth: dict[str, int] = {}
    queue = deque((root, 1) for root in roots)
    while queue:
        node_id, level = queue.popleft()
        depth[node_id] = level
        if level > limits.depth:
            raise ImportTooLarge(
                f"{where} has a path of more than IMPORT_MAX_DEPTH ({limits.depth}) nodes"
            )
        queue.extend((child, level + 1) for child in children[node_id])

    shown = conversation.get("current_node")
    if not isinstance(shown, str) or shown not in depth:
        leaves = [node_id for node_id in depth if not children[node_id]]
        shown = max(leaves, key=lambda leaf: written.get(leaf, 0.0), default=None)
    main: list[str] = []
    while shown is not None:
        main.append(shown)
        parent = mapping[shown].get("parent")
        shown = parent if parent in depth and depth[parent] < depth[shown] else None
    main.reverse()

    paths = [_Path(parent=-1, fork=0, own=main)]
    for root in roots:
        if not main or root != main[0]:
            paths.append(_Path(parent=0, fork=0, own=_descend(root, children)))
    position = 0
    while position < len(paths):
        path = paths[position]
        own = path.own
        for offset, node_id in enumerate(own):
            follows = own[offset + 1] if offset + 1 < len(own) else None
            for child in children[node_id]:
                if child != follows:
                    paths.append(
                        _Path(
                            parent=position,
                            fork=path.fork + offset + 1,
                            own=_descend(child, children),
                        )
                    )
        position += 1
    tree = _Tree(
        source_id=_source_id(conversation, where),
        messages=messages,
        paths=paths,
        dropped=dropped,
        unreached=len(mapping) - len(depth),
    )
    return tree, len(mapping) + len(depth)


def _descend(node_id: str, children: dict[str, list[str]]) -> list[str]:
    """From a node down to a leaf, taking the newest child (ChatGPT appends a regenerated
    answer or an edited question after the ones it replaces)."""
    nodes = [node_id]
    while children[nodes[-1]]:
        nodes.append(children[nodes[-1]][-1])
    return nodes


def _entries(nodes: list[str], tree: _Tree, dropped: Dropped) -> list[NewEntry]:
    path = _ChatGptPath(dropped)
    for node_id in nodes:
        message = tree.messages[node_id]
        if message is not None:
            path.add(message)
    return path.entries


def _source_id(conversation: dict, where: str) -> str:
    source_id = conversation.get("conversation_id") or conversation.get("id")
    if isinstance(source_id, int | float) and not isinstance(source_id, bool):
        source_id = str(source_id)
    if not source_id or not isinstance(source_id, str):
        raise NotAChatGptExport(f"{where} has no id (conversation_id or id)")
    return source_id


def chatgpt_read(raw: bytes, limits: ImportLimits) -> ForeignFile:
    """Every conversation of a ChatGPT export; NotAChatGptExport (naming where) for anything
    else, ImportTooLarge (naming the limit) for more than the budget takes.

    Steps: unpack and parse; check every conversation's shape and count its nodes against
    IMPORT_MAX_NODES; walk each tree once into paths (IMPORT_MAX_DEPTH); make each main path
    into entries; then the branches in order while the entry and branch budgets last.
    """
    conversations = _conversation_list(raw, limits)
    where_of = [f"conversations[{index}]" for index in range(len(conversations))]
    nodes = 0
    for index, conversation in enumerate(conversations):
        conversation = _object(conversation, where_of[index])
        mapping = _object(conversation.get("mapping"), f"{where_of[index]}.mapping")
        nodes += 1 + len(mapping)
    if nodes > limits.nodes:
        raise ImportTooLarge(
            f"the file has {nodes} conversations and nodes; the limit is IMPORT_MAX_NODES "
            f"({limits.nodes})"
        )
    budget = min(limits.entries, ENTRIES_PER_NODE * nodes)
    result = ForeignFile(conversations=[], entries_budget=budget)
    trees = []
    first_of: dict[str, int] = {}
    for index, conversation in enumerate(conversations):
        tree, walked = _walk(conversation, limits, where_of[index])
        result.nodes_walked += walked
        trees.append(tree)
        main_nodes = tree.paths[0].own
        result.nodes_walked += len(main_nodes)
        main = _entries(main_nodes, tree, tree.dropped)
        title = conversation.get("title")
        foreign = ForeignConversation(
            source_id=tree.source_id,
            created_at=moment(conversation.get("create_time")),
            title=storable(title if isinstance(title, str) else "", tree.dropped)[:TITLE_MAX_CHARS],
            model=next((entry.model for entry in reversed(main) if entry.model), ""),
            main=main,
        )
        if tree.source_id in first_of:
            foreign.error = (
                f"{where_of[index]} has the same id as {where_of[first_of[tree.source_id]]}; "
                "only the first was imported"
            )
        else:
            first_of[tree.source_id] = index
        result.conversations.append(foreign)
    walked_budget = budget - sum(len(tree.paths[0].own) for tree in trees)
    if walked_budget < 0:
        raise ImportTooLarge(
            f"the file's conversations hold more than {budget} messages "
            f"(IMPORT_MAX_ENTRIES, at most {ENTRIES_PER_NODE} per node of the file)"
        )
    branches_left = limits.branches
    out_of_budget = ""  # once a branch does not fit, no later one is read
    for tree, foreign in zip(trees, result.conversations, strict=True):
        if tree.unreached:
            tree.dropped.add("node(s) no root leads to (a cycle of parents)", tree.unreached)
        foreign.notes = tree.dropped.notes()
        if foreign.error:
            continue
        fulls: list[list[str]] = [tree.paths[0].own]  # each read path's nodes, root to leaf
        for path in tree.paths[1:]:
            cost = path.fork + len(path.own)
            if not out_of_budget and branches_left <= 0:
                out_of_budget = (
                    f"over IMPORT_MAX_BRANCHES ({limits.branches} branch sessions a file)"
                )
            elif not out_of_budget and cost > walked_budget:
                out_of_budget = (
                    f"over the file's budget of {budget} entries (IMPORT_MAX_ENTRIES, at most "
                    f"{ENTRIES_PER_NODE} per node of the file)"
                )
            if out_of_budget:
                foreign.left_out = len(tree.paths) - len(fulls)
                foreign.left_out_why = out_of_budget
                break
            walked_budget -= cost
            branches_left -= 1
            result.nodes_walked += cost
            full = fulls[path.parent][: path.fork] + path.own
            fulls.append(full)
            dropped = Dropped()
            foreign.branches.append(
                ForeignBranch(
                    source_id=f"{tree.source_id}:{path.own[-1]}",
                    entries=_entries(full, tree, dropped),
                    parent=path.parent - 1,
                    notes=dropped.notes(),
                )
            )
    return result
