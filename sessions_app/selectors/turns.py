"""Reads of one turn: its timeline and the requests it sent (docs/design.md §20).

Both are rebuilt from the session's entries alone (and, for requests, the turn's request
header): a turn is the entries carrying its `turn_id`, its steps are its assistant
messages, in seq order. Entries of a schema version this code does not know are left out.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from jarvis_site.shared.errors import Code, DomainError
from sessions_app.runtime.providers import ToolSpec, provider_for
from sessions_app.selectors.sessions import session_get
from sessions_app.store import EntryRecord, SessionMeta, get_store
from sessions_app.store.base import ENTRY_VERSIONS_KNOWN
from sessions_app.store.request_headers import header_get


class TurnNotFound(DomainError, LookupError):
    """No turn with this id in the caller's session (404 not_found)."""

    code = Code.NOT_FOUND

    def __init__(self, turn_id: str):
        super().__init__(f"no turn {turn_id!r} in this session")


@dataclass(frozen=True)
class TurnLog:
    meta: SessionMeta
    history: list[EntryRecord]  # the whole session, known versions only
    start: EntryRecord  # the turn's turn_start
    entries: list[EntryRecord]  # the turn's own entries, in seq order

    @property
    def status(self) -> str:
        """The turn_end's status; `running` while there is none."""
        end = next((e for e in reversed(self.entries) if e.kind == "turn_end"), None)
        return str((end.data or {}).get("status", "")) if end is not None else "running"

    @property
    def steps(self) -> list[EntryRecord]:
        return [e for e in self.entries if e.kind == "message" and e.role == "assistant"]


def turn_log(*, session_id: str, owner_id: int | None, turn_id: str) -> TurnLog:
    """The turn's entries; SessionNotFound for another user's session, TurnNotFound for a
    turn the session does not have."""
    meta = session_get(session_id=session_id, owner_id=owner_id)
    history = [e for e in get_store().get_messages(session_id) if e.v in ENTRY_VERSIONS_KNOWN]
    entries = [e for e in history if e.turn_id == turn_id] if turn_id else []
    start = next((e for e in entries if e.kind == "turn_start"), None)
    if start is None:
        raise TurnNotFound(turn_id)
    return TurnLog(meta=meta, history=history, start=start, entries=entries)


def turn_timeline(*, session_id: str, owner_id: int | None, turn_id: str) -> dict[str, Any]:
    """`{turn_id, status, started_at, steps}`: each step's model call and its tool calls.

    A tool result without timing (one the turn's closing or a repair wrote for a call that
    never ran to its end) has no start and no duration.
    """
    log = turn_log(session_id=session_id, owner_id=owner_id, turn_id=turn_id)
    results = {e.tool_call_id: e for e in log.entries if e.kind == "message" and e.role == "tool"}
    steps = []
    for step in log.steps:
        call_fact = (step.data or {}).get("model_call") or {}
        tools = []
        for call in step.tool_calls or ():
            result = results.get(call["id"])
            tool_fact = ((result.data or {}).get("tool") or {}) if result is not None else {}
            if result is None:
                outcome = "pending"
            else:
                outcome = tool_fact.get("outcome") or ("error" if result.is_error else "ok")
            tools.append(
                {
                    "call_id": call["id"],
                    "name": call["name"],
                    "started_at": tool_fact.get("started_at"),
                    "duration_ms": tool_fact.get("duration_ms"),
                    "outcome": outcome,
                }
            )
        steps.append(
            {
                "model_call": {
                    "model": step.model,
                    "started_at": call_fact.get("started_at"),
                    "duration_ms": call_fact.get("duration_ms"),
                    "finish_reason": call_fact.get("finish_reason"),
                    "usage": step.usage,
                },
                "tools": tools,
            }
        )
    return {
        "turn_id": turn_id,
        "status": log.status,
        "started_at": log.start.created_at.isoformat(),
        "steps": steps,
    }


def request_header_of(start: EntryRecord) -> dict[str, Any]:
    """The header a turn's requests shared: the stored one its `turn_start` names, or —
    for a turn stored before headers had rows of their own — the copy its `turn_start`
    carried (`system_prompt`, `tools`, `parameters`; thinking was always off)."""
    data = start.data or {}
    if data.get("header"):
        header = header_get(data["header"])
        if header is None:
            raise TurnNotFound(start.turn_id)
        return header
    return {
        "system": data.get("system_prompt", ""),
        "tools": data.get("tools") or [],
        "parameters": data.get("parameters") or {},
        "thinking": "off",
    }


def turn_requests(*, session_id: str, owner_id: int | None, turn_id: str) -> dict[str, Any]:
    """For each step of the turn, the body that was sent to the model, rebuilt.

    The context of step k is what the turn saw when it made that call: every entry stored
    before its `turn_start` (a repair it made included) and its own entries before the
    step's answer. Entries another writer stored while it ran (a compaction) did not reach
    its requests and are left out here too; a compaction before the turn is in force as it
    was. The body is built by the same provider code, with the turn's header, so it is the
    request as sent — equal as JSON to what the provider received.
    """
    log = turn_log(session_id=session_id, owner_id=owner_id, turn_id=turn_id)
    header = request_header_of(log.start)
    model = str((log.start.data or {}).get("model") or "offline")
    provider = provider_for(model)
    before = [e for e in log.history if e.seq < log.start.seq]
    tools = [ToolSpec(**tool) for tool in header["tools"]]
    requests = []
    for step in log.steps:
        seen = before + [e for e in log.entries if e.seq < step.seq]
        body = provider.request_body(
            entries=seen,
            system_prompt=header["system"],
            tools=tools,
            parameters=header["parameters"],
        )
        requests.append({"seq": step.seq, "body": body})
    return {"turn_id": turn_id, "model": model, "requests": requests}
