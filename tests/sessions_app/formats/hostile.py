"""Files made to cost an import more than they are worth, and odd but well-formed ones,
built as the tests need them (docs/design.md §27)."""

import json
import sqlite3
import zipfile
from pathlib import Path

from .fixtures import CREATED, _node, openai_agents_database


def conversation(nodes: list[dict], *, conversation_id="conv-1", title="Hostile", **extra) -> dict:
    return {
        "title": title,
        "create_time": CREATED,
        "mapping": {node["id"]: node for node in nodes},
        "conversation_id": conversation_id,
        **extra,
    }


def chain(length: int, *, side_leaves: bool = False) -> list[dict]:
    """A conversation of `length` messages (user, assistant, …); with `side_leaves`, every
    message after the first also has a regenerated sibling that ends there: a fork at every
    depth, the shape whose paths, copied whole per leaf, cost the square of the tree."""
    nodes = {"root": _node("root", None, [])}
    parent = "root"
    for index in range(length):
        role = "user" if index % 2 == 0 else "assistant"
        if side_leaves and index > 0:
            nodes[f"s{index}"] = _node(f"s{index}", parent, [], role, f"other {index}")
            nodes[parent]["children"].append(f"s{index}")
        nodes[f"m{index}"] = _node(f"m{index}", parent, [], role, f"message {index}")
        nodes[parent]["children"].append(f"m{index}")
        parent = f"m{index}"
    return list(nodes.values())


def branch_heavy(length: int) -> dict:
    nodes = chain(length, side_leaves=True)
    return conversation(nodes, current_node=f"m{length - 1}")


def zip_bomb(path: Path, unpacked_mib: int) -> Path:
    """A zip whose conversations.json is `unpacked_mib` MiB of spaces (valid JSON padding
    around an empty list), written a MiB at a time."""
    with (
        zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive,
        archive.open("conversations.json", "w") as member,
    ):
        member.write(b"[")
        for _ in range(unpacked_mib):
            member.write(b" " * (1024 * 1024))
        member.write(b"]")
    return path


def stored_zip(path: Path, content: bytes) -> Path:
    """A zip that does not compress at all (ratio 1)."""
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_STORED) as archive:
        archive.writestr("export/conversations.json", content)
    return path


def agents_database_with_a_view(path: Path, rows: int) -> Path:
    """agent_messages as a recursive view: a few KiB that read as `rows` items."""
    connection = sqlite3.connect(path)
    connection.executescript(
        f"""
        CREATE TABLE agent_sessions (session_id TEXT PRIMARY KEY, created_at TIMESTAMP);
        INSERT INTO agent_sessions VALUES ('support-42', '2025-05-01 10:00:00');
        CREATE VIEW agent_messages AS
            WITH RECURSIVE counter(id) AS (
                SELECT 1 UNION ALL SELECT id + 1 FROM counter LIMIT {rows}
            )
            SELECT id, 'support-42' AS session_id,
                   '{{"role": "user", "content": "again"}}' AS message_data
            FROM counter;
        """
    )
    connection.commit()
    connection.close()
    return path


def agents_database_with_rows(path: Path, rows: int) -> Path:
    """The SDK's schema and `rows` more user items in its one session."""
    openai_agents_database(path)
    connection = sqlite3.connect(path)
    connection.executemany(
        "INSERT INTO agent_messages (session_id, message_data) VALUES (?, ?)",
        [("support-42", json.dumps({"role": "user", "content": f"n{n}"})) for n in range(rows)],
    )
    connection.commit()
    connection.close()
    return path


def agents_database_with_a_large_schema(path: Path, tables: int) -> Path:
    """The SDK's tables, one short session, and `tables` more tables: every statement's
    look at the schema costs steps while the rows stay few."""
    openai_agents_database(path)
    connection = sqlite3.connect(path)
    connection.executescript(  # one transaction: one write of the file, not one per table
        "BEGIN;"
        + "".join(f"CREATE TABLE padding_{n} (x INTEGER);" for n in range(tables))
        + "COMMIT;"
    )
    connection.commit()
    connection.close()
    return path


def agents_database_with_a_virtual_table(path: Path) -> Path:
    """agent_messages as a full-text index: listed as a table, answered by its module."""
    connection = sqlite3.connect(path)
    connection.executescript(
        """
        CREATE TABLE agent_sessions (session_id TEXT PRIMARY KEY, created_at TIMESTAMP);
        CREATE VIRTUAL TABLE agent_messages USING fts5(session_id, message_data);
        """
    )
    connection.commit()
    connection.close()
    return path
