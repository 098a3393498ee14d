"""Every frame the server sends over a session's WebSocket fits in one message (docs/design.md §8).

Daphne sends and receives WebSocket messages of at most `WEBSOCKET_MESSAGE_MAX_BYTES`; a
larger send fails the socket with 1011, on every connect if it is the history. So frames are
JSON in UTF-8 (an emoji is 4 bytes, not the 12 of `\\ud83d\\ude00`), an entry larger than
`SNAPSHOT_BUDGET_BYTES` travels as a stub the page fetches over HTTP, and any other frame that
would not fit is cut down to one that does.
"""

from __future__ import annotations

import json
from typing import Any

from django.conf import settings

from jarvis_site.shared.errors import Code

# How much of a stubbed entry's text the stub shows while the page fetches the rest.
PREVIEW_CHARS = 500
# The fields of an entry a stub keeps: all but the ones that can be large.
STUB_FIELDS = ("seq", "kind", "role", "name", "tool_call_id", "is_error", "model", "turn_id")


def encode(frame: Any) -> tuple[str, int]:
    """The frame as JSON text and its size in bytes on the wire."""
    text = json.dumps(frame, ensure_ascii=False)
    try:
        return text, len(text.encode("utf-8"))
    except UnicodeEncodeError:
        # A lone surrogate has no UTF-8 form; escaped, it is valid JSON.
        text = json.dumps(frame)
        return text, len(text)


# How every `agent_end` frame's text begins (the type is an event's first key): a turn's
# end is told from the encoded frame, as events from other workers arrive.
TURN_END_PREFIX = encode({"type": "agent_end"})[0][:-1]


def is_turn_end(text: str) -> bool:
    return text.startswith(TURN_END_PREFIX)


def preview(text: str) -> str:
    return text[:PREVIEW_CHARS]


def entry_stub(entry: dict[str, Any], size: int) -> dict[str, Any]:
    """What a frame carries of an entry too large for it: enough to place and label it, a
    preview, and its size; the page fetches the whole entry over HTTP."""
    stub = {field: entry.get(field) for field in STUB_FIELDS}
    stub["created_at"] = entry.get("created_at")
    stub.update(truncated=True, size=size, preview=preview(entry.get("content") or ""))
    return stub


def entry_for_frame(entry: dict[str, Any]) -> tuple[dict[str, Any], int]:
    """The entry, or its stub when its JSON is over the snapshot budget; and the size of
    what is returned."""
    _, size = encode(entry)
    if size <= settings.SNAPSHOT_BUDGET_BYTES:
        return entry, size
    stub = entry_stub(entry, size)
    return stub, encode(stub)[1]


def approval_for_frame(request: dict[str, Any]) -> dict[str, Any]:
    """A pending approval; arguments too large for a frame are cut to a preview (the whole
    call is in its assistant entry)."""
    if encode(request["arguments"])[1] * 4 <= settings.SNAPSHOT_BUDGET_BYTES:
        return request
    return {**request, "arguments": preview(str(request["arguments"])), "truncated": True}


def running_for_frame(running: dict[str, Any] | None) -> dict[str, Any] | None:
    """The running turn as the snapshot shows it (docs/design.md §17), within a quarter of
    SNAPSHOT_BUDGET_BYTES: a streamed text larger than that keeps its end, and `text_from`
    says how many characters before it were left out (the whole text is stored with its
    step once the step ends); tool arguments too large are cut to a preview."""
    if running is None:
        return None
    shown = {key: value for key, value in running.items() if key != "entry_seq"}
    text = shown["text"]
    room = settings.SNAPSHOT_BUDGET_BYTES // 4
    if encode(text)[1] > room:
        tail = text[-(room // 4) :]
        shown.update(text=tail, text_from=len(text) - len(tail))
    shown["tools"] = [approval_for_frame(call) for call in shown["tools"]]
    return shown


def queued_for_frame(item: dict[str, Any]) -> dict[str, Any]:
    """A waiting prompt in the snapshot: MAX_QUEUED_PER_SESSION prompts of up to 100,000
    characters each would not fit one frame, so a long one shows as its preview (its whole
    text is stored, and is the turn's message when it runs)."""
    if len(item["text"]) <= PREVIEW_CHARS:
        return item
    return {**item, "text": preview(item["text"]), "truncated": True}


def _cut_down(frame: dict[str, Any]) -> dict[str, Any]:
    kind = frame.get("type")
    if kind == "command_result":
        # The text is for reading; the data a page acts on is small for every command
        # whose result can be this large (listings), so the page loses nothing it needs.
        return {**frame, "text": preview(str(frame.get("text", ""))), "data": {}, "truncated": True}
    if kind == "approval_request":
        return approval_for_frame(frame)
    return _too_large(kind)


def _too_large(kind: Any) -> dict[str, Any]:
    return {
        "type": "error",
        "code": Code.TOO_LARGE,
        "message": f"a {kind} event was too large to send; reload to see what it changed",
    }


def frame_text(frame: dict[str, Any]) -> str:
    """The JSON text of a frame for the socket, never over the message limit."""
    if frame.get("type") == "entry":
        frame = {**frame, "entry": entry_for_frame(frame["entry"])[0]}
    text, size = encode(frame)
    if size <= settings.WEBSOCKET_MESSAGE_MAX_BYTES:
        return text
    text, size = encode(_cut_down(frame))
    if size <= settings.WEBSOCKET_MESSAGE_MAX_BYTES:
        return text
    return encode(_too_large(frame.get("type")))[0]


def inbound_size(data: str | bytes) -> int:
    """The bytes a received frame had on the wire."""
    if isinstance(data, bytes):
        return len(data)
    return len(data.encode("utf-8", "surrogatepass"))
