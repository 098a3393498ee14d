"""A session rendered for export: JSON with every field, or Markdown a person reads."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from sessions_app.selectors.sessions import notice_to_api, session_to_api
from sessions_app.store import EntryRecord, Notice, SessionMeta, get_store


def export_json(
    meta: SessionMeta, entries: Sequence[EntryRecord], notices: Sequence[Notice]
) -> dict[str, Any]:
    """Everything: the meta, every entry with every field, every notice."""
    return {
        "session": session_to_api(meta),
        "entries": [entry.to_dict() for entry in entries],
        "proactive": [notice_to_api(notice) for notice in notices],
    }


def _fence(text: str) -> str:
    """A fenced block that the text itself cannot close."""
    fence = "```"
    while fence in text:
        fence += "`"
    return f"{fence}\n{text}\n{fence}"


def _arguments(raw: str) -> str:
    try:
        return json.dumps(json.loads(raw), ensure_ascii=False, indent=2)
    except (TypeError, ValueError):
        return raw


def export_markdown(
    meta: SessionMeta, entries: Sequence[EntryRecord], notices: Sequence[Notice]
) -> str:
    """A readable transcript: who said what, tool calls and results, compactions, turn ends."""
    lines = [f"# Session {meta.id}", ""]
    lines.append(f"- agent: {meta.agent}")
    if meta.title:
        lines.append(f"- title: {meta.title}")
    if meta.parent_id:
        lines.append(f"- branched from: {meta.parent_id} at seq {meta.branched_at_seq}")
    lines.append(f"- created: {meta.created_at.isoformat()}")
    lines.append(f"- last activity: {meta.updated_at.isoformat()}")
    lines.append(f"- entries: {len(entries)}")
    lines.append("")
    for entry in entries:
        lines.extend(_markdown_entry(entry))
        lines.append("")
    if notices:
        lines.append("## Proactive notices")
        lines.append("")
        for notice in notices:
            lines.append(f"- 🔔 {notice.created_at.isoformat()} — {notice.content}")
        lines.append("")
    return "\n".join(lines)


def _took(entry: EntryRecord, fact: str) -> str:
    """How long the entry's model or tool call took, as " · 1.2 s"; "" when not recorded."""
    timing = (entry.data or {}).get(fact) or {}
    duration_ms = timing.get("duration_ms") if isinstance(timing, dict) else None
    if not isinstance(duration_ms, int):
        return ""
    return f" · {duration_ms} ms" if duration_ms < 100 else f" · {duration_ms / 1000:.1f} s"


def _markdown_entry(entry: EntryRecord) -> list[str]:
    stamp = f"#{entry.seq} · {entry.created_at.isoformat()}"
    if entry.kind == "message" and entry.role == "user":
        return [f"### 🧑 User ({stamp})", "", entry.content]
    if entry.kind == "message" and entry.role == "assistant":
        model = " · " + entry.model if entry.model else ""
        out = [f"### 🤖 Assistant ({stamp}{model}{_took(entry, 'model_call')})", ""]
        if entry.content:
            out.append(entry.content)
        for call in entry.tool_calls or ():
            out += ["", f"**Tool call** `{call['name']}` (id `{call['id']}`):", ""]
            out.append(_fence(_arguments(call.get("arguments", ""))))
        return out
    if entry.kind == "message" and entry.role == "tool":
        label = "Tool error" if entry.is_error else "Tool result"
        return [
            f"### 🔧 {label}: `{entry.name}` (call `{entry.tool_call_id}`, {stamp}"
            f"{_took(entry, 'tool')})",
            "",
            _fence(entry.content),
        ]
    if entry.kind == "turn_start":
        model = (entry.data or {}).get("model", "")
        return [
            "---",
            f"*Turn `{entry.turn_id}` started{' with ' + model if model else ''} ({stamp})*",
        ]
    if entry.kind == "turn_end":
        data = entry.data or {}
        status = data.get("status", "unknown")
        text = f"*Turn `{entry.turn_id}` ended: **{status}***"
        if data.get("error"):
            text += f" — {data['error']}"
        return [text]
    if entry.kind == "compaction":
        data = entry.data or {}
        return [
            f"### 🗜 Compaction ({stamp})",
            "",
            f"Earlier entries summarized; kept from seq {data.get('first_kept_seq')} "
            f"({data.get('tokens_before')} tokens before).",
            "",
            f"> {str(data.get('summary', '')).replace(chr(10), chr(10) + '> ')}",
        ]
    if entry.kind == "branch_summary":
        data = entry.data or {}
        return [
            f"### ⑂ Branched from {data.get('from_session')} at seq {data.get('at_seq')} ({stamp})",
            "",
            "What that path did:",
            "",
            f"> {str(data.get('summary', '')).replace(chr(10), chr(10) + '> ')}",
        ]
    return [f"### {entry.kind} ({stamp})", "", _fence(json.dumps(entry.to_dict(), indent=2))]


def session_export_documents(meta: SessionMeta) -> tuple[dict[str, Any], str]:
    """The session as its JSON export and its Markdown one, read once."""
    store = get_store()
    entries = store.get_messages(meta.id)
    notices = store.get_proactive(meta.id)
    return export_json(meta, entries, notices), export_markdown(meta, entries, notices)
