"""Small, realistic histories of other tools: a ChatGPT data export and an openai-agents
SQLiteSession database with the SDK's own schema (agents/memory/sqlite_session.py)."""

import json
import sqlite3
from pathlib import Path

CREATED = 1_717_000_000.25


def _node(node_id, parent, children, role=None, text="", **message):
    if role is None:
        return {"id": node_id, "message": None, "parent": parent, "children": children}
    content = message.pop("content", {"content_type": "text", "parts": [text]})
    return {
        "id": node_id,
        "parent": parent,
        "children": children,
        "message": {
            "id": node_id,
            "author": {"role": role, "name": message.pop("name", None), "metadata": {}},
            "create_time": CREATED,
            "content": content,
            "status": "finished_successfully",
            "end_turn": True,
            "weight": 1.0,
            "metadata": message.pop("metadata", {}),
            "recipient": message.pop("recipient", "all"),
        },
    }


def regenerated_conversation() -> dict:
    """A question whose answer was regenerated: the first answer stays in the tree as the
    other child of the question; the conversation went on from the second."""
    nodes = [
        _node("root", None, ["sys"]),
        _node(
            "sys",
            "root",
            ["q1"],
            "system",
            "",
            metadata={"is_visually_hidden_from_conversation": True},
        ),
        _node("q1", "sys", ["a1-old", "a1-new"], "user", "What is the capital of France?"),
        _node("a1-old", "q1", [], "assistant", "Paris.", metadata={"model_slug": "gpt-4o"}),
        _node(
            "a1-new",
            "q1",
            ["q2"],
            "assistant",
            "The capital of France is Paris.",
            metadata={"model_slug": "gpt-4o"},
        ),
        _node("q2", "a1-new", ["a2"], "user", "And of Germany?"),
        _node("a2", "q2", [], "assistant", "Berlin.", metadata={"model_slug": "gpt-4o"}),
    ]
    return {
        "title": "Capitals",
        "create_time": CREATED,
        "update_time": CREATED + 60,
        "mapping": {node["id"]: node for node in nodes},
        "current_node": "a2",
        "conversation_id": "6651a1b2-0000-4000-8000-capitals0001",
        "id": "6651a1b2-0000-4000-8000-capitals0001",
    }


def code_conversation() -> dict:
    """The code interpreter: code sent to `python`, its output, the answer; a browsing quote
    that answers no call; an image the user attached; the model's hidden context."""
    nodes = [
        _node("root", None, ["ctx"]),
        _node(
            "ctx",
            "root",
            ["u1"],
            "user",
            content={"content_type": "user_editable_context", "user_profile": "I am Sam"},
            metadata={"is_visually_hidden_from_conversation": True},
        ),
        _node(
            "u1",
            "ctx",
            ["c1"],
            "user",
            content={
                "content_type": "multimodal_text",
                "parts": [
                    {"content_type": "image_asset_pointer", "asset_pointer": "file-1"},
                    "What is 2**10?",
                ],
            },
        ),
        _node(
            "c1",
            "u1",
            ["o1"],
            "assistant",
            content={"content_type": "code", "language": "python", "text": "2**10"},
            recipient="python",
        ),
        _node(
            "o1",
            "c1",
            ["q1"],
            "tool",
            name="python",
            content={"content_type": "execution_output", "text": "1024"},
        ),
        _node(
            "q1",
            "o1",
            ["a1"],
            "tool",
            name="browser",
            content={"content_type": "tether_quote", "text": "a quote", "url": "https://x"},
        ),
        _node("a1", "q1", [], "assistant", "2**10 is 1024."),
    ]
    return {
        "title": "Powers",
        "create_time": CREATED + 100,
        "mapping": {node["id"]: node for node in nodes},
        "current_node": "a1",
        "conversation_id": "6651a1b2-0000-4000-8000-powers000002",
    }


def chatgpt_export(path: Path, *conversations: dict) -> Path:
    path.write_text(json.dumps(list(conversations)), encoding="utf-8")
    return path


def openai_agents_database(path: Path) -> Path:
    """An SQLiteSession file as the SDK writes it: its tables, one session, one item a row."""
    connection = sqlite3.connect(path)
    connection.executescript(
        """
        CREATE TABLE IF NOT EXISTS agent_sessions (
            session_id TEXT PRIMARY KEY,
            created_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP,
            updated_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP
        );
        CREATE TABLE IF NOT EXISTS agent_messages (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            session_id TEXT NOT NULL,
            message_data TEXT NOT NULL,
            created_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP,
            FOREIGN KEY (session_id) REFERENCES agent_sessions (session_id) ON DELETE CASCADE
        );
        CREATE INDEX IF NOT EXISTS idx_agent_messages_session_id
            ON agent_messages (session_id, id);
        """
    )
    items = [
        {"role": "user", "content": "What's the weather in Paris?"},
        {"type": "reasoning", "id": "rs_1", "summary": []},
        {
            "type": "function_call",
            "id": "fc_1",
            "call_id": "call_weather_1",
            "name": "get_weather",
            "arguments": '{"city": "Paris"}',
            "status": "completed",
        },
        {"type": "function_call_output", "call_id": "call_weather_1", "output": "sunny, 21C"},
        {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "status": "completed",
            "content": [
                {"type": "output_text", "text": "It is sunny and 21°C in Paris.", "annotations": []}
            ],
        },
    ]
    connection.execute(
        "INSERT INTO agent_sessions (session_id, created_at) VALUES (?, ?)",
        ("support-42", "2025-05-01 10:00:00"),
    )
    connection.executemany(
        "INSERT INTO agent_messages (session_id, message_data) VALUES (?, ?)",
        [("support-42", json.dumps(item)) for item in items],
    )
    connection.commit()
    connection.close()
    return path
