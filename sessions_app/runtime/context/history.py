"""Pure functions over a session's entries: pairing repair, projection, validation (docs/design.md §5).

No database, no I/O: the store and the turn loop both call these, and property tests can
throw any history at them.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from django.conf import settings

from jarvis_site.shared.errors import Code, DomainError
from sessions_app.store.base import ENTRY_VERSIONS_KNOWN, EntryRecord, NewEntry

CRASH_RESULT_TEXT = "outcome unknown: the process stopped while this tool ran"
CRASH_TURN_ERROR = "the process stopped before this turn finished"


def open_turn_id(entries: Sequence[EntryRecord]) -> str | None:
    """The turn id of a trailing turn that has a `turn_start` but no `turn_end`, else None."""
    for entry in reversed(entries):
        if entry.kind == "turn_end":
            return None
        if entry.kind == "turn_start":
            return entry.turn_id
    return None


# --- the pairing of tool calls and results (docs/design.md §5) ------------------------------


@dataclass(frozen=True)
class CallsMade:
    """An assistant message's tool calls (the entry at `at`) and what answered them: for each
    call, in call order, the index of its result, or None. A call's results are the tool
    messages after it up to `until`, the next user or assistant message or turn marker (the
    end of the entries when none came); a result answers the first call still waiting with its
    id, so a repeated id is answered in order and a second result for one call answers nothing.
    """

    at: int
    calls: tuple[dict, ...]
    results: tuple[int | None, ...]
    until: int

    def unanswered(self) -> list[dict]:
        return [
            call for call, result in zip(self.calls, self.results, strict=True) if result is None
        ]


def calls_made(entries: Sequence[EntryRecord | NewEntry]) -> list[CallsMade]:
    """Every assistant message with calls, paired with its results: the one reading of the
    pairing that the turn's repair, an import's repair and the projection all use. Only
    messages and turn markers count: other kinds are facts that no model sees."""
    made: list[CallsMade] = []
    at: int | None = None
    results: list[int | None] = []

    def close(until: int) -> None:
        if at is not None:
            calls = tuple(entries[at].tool_calls)
            made.append(CallsMade(at=at, calls=calls, results=tuple(results), until=until))

    for index, entry in enumerate(entries):
        is_message = entry.kind == "message"
        if is_message and entry.role == "tool":
            if at is not None:
                for position, call in enumerate(entries[at].tool_calls):
                    if results[position] is None and str(call["id"]) == entry.tool_call_id:
                        results[position] = index
                        break
            continue
        if not is_message and entry.kind not in {"turn_start", "turn_end"}:
            continue
        close(index)
        at = None
        if is_message and entry.role == "assistant" and entry.tool_calls:
            at, results = index, [None] * len(entry.tool_calls)
    close(len(entries))
    return made


def unanswered_calls(entries: Sequence[EntryRecord]) -> list[dict]:
    """Tool calls of the last assistant message that have no result after it, in call order
    (none when a message or a turn marker came after it)."""
    made = calls_made(entries)
    if not made or made[-1].until != len(entries):
        return []
    return made[-1].unanswered()


def repair_entries(
    entries: Sequence[EntryRecord],
    *,
    result_text: str = CRASH_RESULT_TEXT,
    turn_error: str = CRASH_TURN_ERROR,
    status: str = "interrupted",
    result_texts: Mapping[str, str] | None = None,
    code: str = "",
) -> list[NewEntry]:
    """Entries that close a trailing unfinished turn; empty when the history is already closed.

    Steps: an error result for every call of the last assistant message still waiting for one
    (in call order, so results stay contiguous; `result_texts` gives some calls, by id, a
    text of their own), then `turn_end` with `status` (a crash or a cut branch:
    `interrupted`; the turn loop passes how its own turn ended, and the error `code` of
    one that failed for a reason the error table names).
    Applying the result and calling again returns nothing: repair is idempotent.
    """
    turn_id = open_turn_id(entries)
    dangling = unanswered_calls(entries)
    if turn_id is None and not dangling:
        return []
    repairs = [
        NewEntry(
            kind="message",
            role="tool",
            tool_call_id=call["id"],
            name=call["name"],
            content=(result_texts or {}).get(call["id"], result_text),
            is_error=True,
            turn_id=turn_id or "",
        )
        for call in dangling
    ]
    if turn_id is not None:
        repairs.append(
            NewEntry(
                kind="turn_end",
                turn_id=turn_id,
                data={"status": status, "error": turn_error} | ({"code": code} if code else {}),
            )
        )
    return repairs


# --- projection into what a model receives --------------------------------------------------

SUMMARY_PREFIX = "Summary of the earlier conversation:\n"
MISSING_RESULT_TEXT = "no result was recorded for this tool call"
EMPTY_RESULT_TEXT = "(no output)"
CONTINUED_TEXT = "(the conversation continues)"
# Between the head and the tail of a tool result too long to send whole (docs/design.md §22).
RESULT_CUT_TEXT = "\n[… {left_out} characters of this tool result left out …]\n"
# A token is about four characters of English text or JSON: the bound on a result is kept in
# characters, so that the projection stays a pure function of the entries.
RESULT_CHARS_PER_TOKEN = 4


def tool_result_max_chars() -> int:
    return settings.TOOL_RESULT_MAX_TOKENS * RESULT_CHARS_PER_TOKEN


def bounded_result(text: str, max_chars: int) -> str:
    """The text when it has at most `max_chars` characters; else its head and its tail
    around a marker saying how many characters were left out."""
    if len(text) <= max_chars:
        return text
    head = max_chars * 2 // 3
    tail = max_chars - head
    return text[:head] + RESULT_CUT_TEXT.format(left_out=len(text) - max_chars) + text[-tail:]


class HistoryInvalid(DomainError, ValueError):
    """A projected history breaks a provider's rules; the message names the offending index."""

    code = Code.HISTORY_INVALID


@dataclass(frozen=True)
class _Turn:
    """One message of the provider-neutral conversation that both formats are made from."""

    role: str  # user | assistant | tool
    text: str = ""
    calls: tuple[dict, ...] = ()
    call_id: str = ""
    name: str = ""
    is_error: bool = False
    reasoning: tuple[dict, ...] = ()  # an answer's thinking blocks (Anthropic's, signed)
    # A user message's attachments, in the providers' common shape (runtime/context/attachments.py):
    # {"type": "image", "mime", "data"} or {"type": "text", "text"}; sent before its text.
    parts: tuple[dict, ...] = ()


# Reads a message's attachments (`data.attachments`) into parts; a projection given none
# sends every attachment as its stand-in (`attachment_stand_ins`), reading nothing.
AttachmentReader = Callable[[list[dict]], list[dict]]


def image_stand_in(ref: dict) -> str:
    """What a model that cannot see an image is sent in its place: "[image: name, W×H]"."""
    size = f", {ref['width']}×{ref['height']}" if ref.get("width") else ""
    return f"[image: {ref.get('name', 'image')}{size}]"


def attachment_stand_ins(refs: list[dict]) -> list[dict]:
    return [
        {
            "type": "text",
            "text": image_stand_in(ref)
            if str(ref.get("mime", "")).startswith("image/")
            else f"[file: {ref.get('name', 'file')}]",
        }
        for ref in refs
    ]


def attachments_of(entry: EntryRecord) -> list[dict]:
    """The attachments a user message keeps (ids and names, never bytes)."""
    refs = (entry.data or {}).get("attachments") if entry.role == "user" else None
    return [ref for ref in refs if isinstance(ref, dict) and ref.get("id")] if refs else []


def result_images_of(entry: EntryRecord) -> list[dict]:
    """The images a tool result made (`data.files`, a sandbox run's: docs/design.md §28), as
    attachment refs: a model that sees images is shown them as it is shown uploaded ones."""
    files = (entry.data or {}).get("files") if entry.role == "tool" else None
    return [
        {"id": file["id"], "name": file.get("path", "image")} | file
        for file in files or ()
        if isinstance(file, dict)
        and file.get("id")
        and str(file.get("mime", "")).startswith("image/")
    ]


def _context_entries(entries: Sequence[EntryRecord]) -> tuple[str | None, list[EntryRecord]]:
    """The latest compaction's summary and the message entries a model still sees.

    Kept entries start at the compaction's `first_kept_seq`; if that falls on tool results,
    the cut moves back to the assistant message that made those calls, so a call is never
    separated from its result. An entry of a schema version this code does not know is left
    out, like an unknown kind (docs/design.md §20): what it means cannot be guessed.
    """
    entries = [entry for entry in entries if entry.v in ENTRY_VERSIONS_KNOWN]
    summary = None
    kept_from = 0
    for entry in reversed(entries):
        if entry.kind == "compaction" and entry.data:
            summary = str(entry.data.get("summary") or "") or None
            kept_from = int(entry.data.get("first_kept_seq") or 0)
            break
    messages = [entry for entry in entries if entry.kind == "message"]
    start = next(
        (index for index, entry in enumerate(messages) if entry.seq >= kept_from), len(messages)
    )
    while 0 < start < len(messages) and messages[start].role == "tool":
        start -= 1
    return summary, messages[start:]


def _conversation(
    entries: Sequence[EntryRecord], files: AttachmentReader | None = None
) -> list[_Turn]:
    """The history as a sequence every provider accepts.

    A tool result longer than TOOL_RESULT_MAX_TOKENS is sent as its head and tail
    (`bounded_result`). Each assistant message with calls is followed by exactly one
    result per call, in call order; a call without a recorded result (legacy data, a crash
    not yet repaired) gets a synthesized error result; results that answer no preceding call are dropped; a call id
    used twice is renamed so ids stay unique; empty messages are left out.
    """
    summary, messages = _context_entries(entries)
    result_chars = tool_result_max_chars()
    turns: list[_Turn] = []
    if summary:
        turns.append(_Turn(role="user", text=SUMMARY_PREFIX + summary))
    used_ids: set[str] = set()
    pairing = {made.at: made for made in calls_made(messages)}
    for index, entry in enumerate(messages):
        if entry.role == "user":
            if entry.content.strip():
                refs = attachments_of(entry)
                parts = (files or attachment_stand_ins)(refs) if refs else []
                turns.append(_Turn(role="user", text=entry.content, parts=tuple(parts)))
            continue
        if entry.role != "assistant":
            continue  # a tool result goes with its call; one that answers no call is left out
        calls = []
        results = []
        made = pairing.get(index)
        for call, result_at in zip(made.calls, made.results, strict=True) if made else ():
            unique_id = str(call["id"])
            while unique_id in used_ids:
                unique_id = f"{unique_id}_{entry.seq}"
            used_ids.add(unique_id)
            calls.append({"id": unique_id, "name": call["name"], "arguments": call["arguments"]})
            if result_at is None:
                results.append(
                    _Turn(
                        role="tool",
                        call_id=unique_id,
                        name=call["name"],
                        text=MISSING_RESULT_TEXT,
                        is_error=True,
                    )
                )
            else:
                result = messages[result_at]
                images = result_images_of(result)
                results.append(
                    _Turn(
                        role="tool",
                        call_id=unique_id,
                        name=result.name or call["name"],
                        text=bounded_result(result.content, result_chars) or EMPTY_RESULT_TEXT,
                        is_error=result.is_error,
                        parts=tuple((files or attachment_stand_ins)(images)) if images else (),
                    )
                )
        if not calls and not entry.content.strip():
            continue
        reasoning = tuple((entry.data or {}).get("reasoning") or ())
        turns.append(
            _Turn(role="assistant", text=entry.content, calls=tuple(calls), reasoning=reasoning)
        )
        turns.extend(results)
    return turns


def project_openai(
    entries: Sequence[EntryRecord], system_prompt: str, files: AttachmentReader | None = None
) -> list[dict]:
    """Chat Completions messages: the system prompt first, then the conversation. A message
    with attachments is a list of parts: each attachment (an image as an `image_url` part
    holding a data URL), then the message's text."""
    messages: list[dict] = [{"role": "system", "content": system_prompt}]
    turns = _conversation(entries, files)
    for index, turn in enumerate(turns):
        if turn.role == "tool":
            messages.append({"role": "tool", "tool_call_id": turn.call_id, "content": turn.text})
            if index + 1 == len(turns) or turns[index + 1].role != "tool":
                messages.extend(_openai_result_images(turns, index))
        elif turn.role == "user" and turn.parts:
            content = [_openai_part(part) for part in turn.parts]
            messages.append({"role": "user", "content": [*content, _text(turn.text)]})
        elif turn.role == "user":
            messages.append({"role": "user", "content": turn.text})
        elif turn.role == "assistant":
            message: dict = {"role": "assistant", "content": turn.text or None}
            if turn.calls:
                message["tool_calls"] = [
                    {
                        "id": call["id"],
                        "type": "function",
                        "function": {"name": call["name"], "arguments": call["arguments"]},
                    }
                    for call in turn.calls
                ]
            messages.append(message)
    return messages


def _openai_result_images(turns: list[_Turn], last: int) -> list[dict]:
    """A tool message holds text only: the images the results ending at `last` made follow
    them as one user message (its text says whose they are)."""
    first = last
    while first > 0 and turns[first - 1].role == "tool":
        first -= 1
    block = [turn for turn in turns[first : last + 1] if turn.parts]
    parts = [part for turn in block for part in turn.parts if part["type"] == "image"]
    if not parts:
        return []
    names = ", ".join(dict.fromkeys(turn.name for turn in block))
    text = _text(f"[the images {names} made, shown to you]")
    return [{"role": "user", "content": [*(_openai_part(part) for part in parts), text]}]


def _text(text: str) -> dict:
    return {"type": "text", "text": text}


def _openai_part(part: dict) -> dict:
    if part["type"] == "image":
        url = f"data:{part['mime']};base64,{part['data']}"
        return {"type": "image_url", "image_url": {"url": url}}
    return _text(part["text"])


def _anthropic_part(part: dict) -> dict:
    if part["type"] == "image":
        source = {"type": "base64", "media_type": part["mime"], "data": part["data"]}
        return {"type": "image", "source": source}
    return _text(part["text"])


def _tool_input(arguments: str) -> dict:
    """Anthropic wants tool input as an object; arguments that are not one are kept as text."""
    try:
        value = json.loads(arguments)
    except ValueError:
        return {"arguments": arguments}
    return value if isinstance(value, dict) else {"arguments": value}


def project_anthropic(
    entries: Sequence[EntryRecord],
    system_prompt: str,
    *,
    thinking: bool = False,
    files: AttachmentReader | None = None,
) -> tuple[str, list]:
    """Messages API: (system, messages).

    Tool results become `tool_result` blocks at the start of one user message, consecutive
    same-role messages are merged (the API requires alternation), and a conversation that
    would open with the assistant gets a short user message first. With `thinking` (the
    request enables it), an answer's stored thinking blocks go back first in its message,
    in the order they came, before its text and tool use (docs/design.md §20). A message's
    attachments come before its text (an image as an `image` block with a base64 source).
    """
    messages: list[dict] = []

    def add(role: str, blocks: list[dict]) -> None:
        if messages and messages[-1]["role"] == role:
            messages[-1]["content"].extend(blocks)
        else:
            messages.append({"role": role, "content": blocks})

    previous_role = ""
    for turn in _conversation(entries, files):
        if turn.role == "user":
            add("user", [*(_anthropic_part(part) for part in turn.parts), _text(turn.text)])
        elif turn.role == "assistant":
            blocks = list(turn.reasoning) if thinking else []
            blocks += [{"type": "text", "text": turn.text}] if turn.text.strip() else []
            blocks += [
                {
                    "type": "tool_use",
                    "id": call["id"],
                    "name": call["name"],
                    "input": _tool_input(call["arguments"]),
                }
                for call in turn.calls
            ]
            add("assistant", blocks)
        else:
            content = turn.text
            if turn.parts:
                # A result's images go inside its block, after its text.
                content = [_text(turn.text), *(_anthropic_part(part) for part in turn.parts)]
            block = {"type": "tool_result", "tool_use_id": turn.call_id, "content": content}
            if turn.is_error:
                block["is_error"] = True
            if previous_role == "tool":
                messages[-1]["content"].append(block)
            else:
                messages.append({"role": "user", "content": [block]})
        previous_role = turn.role
    # Results were appended right after their calls; a user text that followed them was merged
    # behind them, so results always come first in their message.
    if messages and messages[0]["role"] != "user":
        messages.insert(0, {"role": "user", "content": [{"type": "text", "text": CONTINUED_TEXT}]})
    return system_prompt, messages


# --- validation: the providers' own rules, checked before anything is sent ------------------


def validate_openai(messages: Sequence[dict]) -> None:
    """Raise HistoryInvalid the way Chat Completions answers 400 for a broken history."""
    if not messages:
        raise HistoryInvalid("messages: must contain at least one message")
    if messages[0].get("role") != "system":
        raise HistoryInvalid("messages.[0].role: the system prompt must be the first message")
    seen: set[str] = set()
    index = 0
    while index < len(messages):
        message = messages[index]
        role = message.get("role")
        if role not in {"system", "user", "assistant", "tool"}:
            raise HistoryInvalid(f"messages.[{index}].role: unknown role {role!r}")
        if role == "tool":
            raise HistoryInvalid(
                f"messages.[{index}].role: Invalid parameter: messages with role 'tool' must be "
                "a response to a preceeding message with 'tool_calls'."
            )
        calls = message.get("tool_calls") or []
        if role in {"user", "system"} and not str(message.get("content") or "").strip():
            raise HistoryInvalid(f"messages.[{index}].content: must not be empty")
        if role == "assistant" and not calls and not str(message.get("content") or "").strip():
            raise HistoryInvalid(
                f"messages.[{index}].content: an assistant message needs content or tool_calls"
            )
        index += 1
        if not calls:
            continue
        ids = [call["id"] for call in calls]
        for call_id in ids:
            if call_id in seen:
                raise HistoryInvalid(
                    f"messages.[{index - 1}].tool_calls: duplicate tool_call id {call_id!r}"
                )
            seen.add(call_id)
        waiting = list(ids)
        while index < len(messages) and messages[index].get("role") == "tool":
            answered = messages[index].get("tool_call_id")
            if answered not in waiting:
                raise HistoryInvalid(
                    f"messages.[{index}].tool_call_id: {answered!r} does not answer a call of "
                    f"messages.[{index - 1}] (each call is answered exactly once)"
                )
            waiting.remove(answered)
            index += 1
        if waiting:
            raise HistoryInvalid(
                f"messages.[{index}].role: An assistant message with 'tool_calls' must be "
                "followed by tool messages responding to each 'tool_call_id'. The following "
                f"tool_call_ids did not have response messages: {', '.join(waiting)}"
            )


THINKING_BLOCK_TYPES = ("thinking", "redacted_thinking")


def _blocks(message: dict) -> list[dict]:
    content = message.get("content")
    return [{"type": "text", "text": content}] if isinstance(content, str) else content or []


def continues_with_thinking(messages: Sequence[dict]) -> bool:
    """Whether a request with thinking enabled may send these messages: when it continues a
    tool use (the last message holds tool results), the assistant message with that tool use
    must start with a thinking block. A conversation that ends with plain text continues
    nothing and always may."""
    if len(messages) < 2 or messages[-1].get("role") != "user":
        return True
    results = any(block.get("type") == "tool_result" for block in _blocks(messages[-1]))
    continued = _blocks(messages[-2])
    uses = any(block.get("type") == "tool_use" for block in continued)
    return not (results and uses) or continued[0].get("type") in THINKING_BLOCK_TYPES


def validate_anthropic(messages: Sequence[dict], *, thinking: bool = False) -> None:
    """Raise HistoryInvalid the way the Messages API answers 400 for a broken history
    (`thinking`: the request enables extended thinking, which adds its own rule)."""
    if not messages:
        raise HistoryInvalid("messages: at least one message is required")
    if thinking and not continues_with_thinking(messages):
        first = _blocks(messages[-2])[0].get("type")
        raise HistoryInvalid(
            f"messages.{len(messages) - 2}.content.0.type: Expected `thinking` or "
            f"`redacted_thinking`, but found `{first}`. When `thinking` is enabled, a final "
            "`assistant` message must start with a thinking block (preceeding the lastmost "
            "set of `tool_use` and `tool_result` blocks)."
        )
    seen: set[str] = set()
    for index, message in enumerate(messages):
        role = message.get("role")
        if role not in {"user", "assistant"}:
            raise HistoryInvalid(f"messages.{index}.role: must be 'user' or 'assistant'")
        if index == 0 and role != "user":
            raise HistoryInvalid('messages: first message must use the "user" role (messages.0)')
        if index > 0 and role == messages[index - 1]["role"]:
            raise HistoryInvalid(
                f'messages.{index}: roles must alternate between "user" and "assistant", '
                f'but found multiple "{role}" roles in a row'
            )
        content = message.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        if not blocks or any(
            block.get("type") == "text" and not str(block.get("text", "")).strip()
            for block in blocks
        ):
            raise HistoryInvalid(
                f"messages.{index}: all messages must have non-empty content except for the "
                "optional final assistant message"
            )
        previous = messages[index - 1]["content"] if index > 0 else []
        previous_uses = [
            block["id"]
            for block in (previous if isinstance(previous, list) else [])
            if block.get("type") == "tool_use"
        ]
        results = [block for block in blocks if block.get("type") == "tool_result"]
        for position, block in enumerate(blocks):
            if block.get("type") == "tool_result" and position >= len(results):
                raise HistoryInvalid(
                    f"messages.{index}.content.{position}: tool_result blocks must come first "
                    "in their message"
                )
        unexpected = [
            block["tool_use_id"] for block in results if block["tool_use_id"] not in previous_uses
        ]
        if unexpected:
            raise HistoryInvalid(
                f"messages.{index}.content.0: unexpected `tool_use_id` found in `tool_result` "
                f"blocks: {', '.join(unexpected)}. Each `tool_result` block must have a "
                "corresponding `tool_use` block in the previous message."
            )
        for position, block in enumerate(blocks):
            if block.get("type") == "thinking" and not block.get("signature"):
                raise HistoryInvalid(
                    f"messages.{index}.content.{position}.thinking.signature: Field required"
                )
            if block.get("type") == "tool_use":
                if block["id"] in seen:
                    raise HistoryInvalid(
                        f"messages.{index}.content.{position}: `tool_use` ids must be unique"
                    )
                seen.add(block["id"])
        uses = [block["id"] for block in blocks if block.get("type") == "tool_use"]
        if uses:
            following = messages[index + 1]["content"] if index + 1 < len(messages) else []
            answered = {
                block.get("tool_use_id")
                for block in (following if isinstance(following, list) else [])
                if block.get("type") == "tool_result"
            }
            missing = [use for use in uses if use not in answered]
            if missing:
                raise HistoryInvalid(
                    f"messages.{index}: `tool_use` ids were found without `tool_result` blocks "
                    f"immediately after: {', '.join(missing)}. Each `tool_use` block must have "
                    "a corresponding `tool_result` block in the next message."
                )
