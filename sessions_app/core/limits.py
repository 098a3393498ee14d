"""Input limits, the same for the HTTP API, the WebSocket and the `chat` command.

One place says how long a prompt, a notice or a title may be, which sequence numbers exist
and how deep a JSON document may nest, so the three entry points refuse the same input with
the same words. NUL characters are refused everywhere: PostgreSQL cannot store them in text,
and SQLite and the jsonl files would keep a value PostgreSQL later refuses to take. Lone
surrogates (U+D800 to U+DFFF, which JSON's `\ud800` escape and undecodable terminal input
produce) are refused everywhere too: they are not characters, no database or file can encode
them, and a page could not be sent one. The API's serializers, the WebSocket's frames and the
`chat` command all check text here.
"""

from __future__ import annotations

import json
import operator
import re
from itertools import accumulate, count
from typing import Any

from jarvis_site.shared.errors import Code, DomainError

PROMPT_MAX_CHARS = 100_000
NOTICE_MAX_CHARS = 20_000
TITLE_MAX_CHARS = 200
AGENT_MAX_CHARS = 100
MESSAGE_ID_MAX_CHARS = 200
# Sequence numbers are signed 64-bit integers in every database.
SEQ_MAX = 2**63 - 1
JSON_MAX_DEPTH = 100

# Characters no store can keep: NUL, and the halves of UTF-16 surrogate pairs on their own.
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")
# Brackets as steps of nesting, for `bytes.translate`: openers 2, closers 0, all else deleted.
_JSON_STEPS = bytes.maketrans(b"[{]}", b"\x02\x02\x00\x00")
_JSON_NOT_BRACKETS = bytes(set(range(256)) - set(b"[]{}"))
_JSON_STEPS_BLOCK = 65_536


class InputInvalid(DomainError, ValueError):
    """Input outside the limits: 400 `invalid` on HTTP, an `error` frame on the WebSocket."""

    code = Code.INVALID


class JsonTooDeep(ValueError):
    """A JSON document nested deeper than JSON_MAX_DEPTH: `bad_request`."""


def storable_check(value: str, *, name: str) -> str:
    """Return `value` when it holds no NUL character and no lone surrogate, else raise."""
    found = _UNSTORABLE.search(value)
    if found is None:
        return value
    if found.group() == "\x00":
        raise InputInvalid(f"{name} may not contain NUL characters")
    raise InputInvalid(
        f"{name} may not contain a lone surrogate (U+{ord(found.group()):04X}); send text as UTF-8"
    )


def text_check(value: Any, *, name: str, max_chars: int, min_chars: int = 0) -> str:
    """Return `value` when it is a string of min..max characters without NUL or lone
    surrogates, else raise."""
    if not isinstance(value, str):
        raise InputInvalid(f"{name} must be a string")
    storable_check(value, name=name)
    if len(value) > max_chars:
        raise InputInvalid(f"{name} has {len(value)} characters; the limit is {max_chars}")
    if len(value.strip()) < min_chars:
        raise InputInvalid(f"{name} may not be empty")
    return value


def prompt_check(text: Any) -> str:
    """A prompt: 1..PROMPT_MAX_CHARS characters, not only whitespace, no NUL."""
    return text_check(text, name="the prompt", max_chars=PROMPT_MAX_CHARS, min_chars=1)


def agent_check(agent: Any) -> str:
    return text_check(agent, name="the agent", max_chars=AGENT_MAX_CHARS, min_chars=1)


def title_check(title: Any) -> str:
    return text_check(title, name="the title", max_chars=TITLE_MAX_CHARS)


def renamed_title_check(title: Any) -> str:
    """A title the person gives: not empty (an empty one would read as a nameless row)."""
    return text_check(title, name="the title", max_chars=TITLE_MAX_CHARS, min_chars=1).strip()


def notice_check(content: Any) -> str:
    return text_check(content, name="the notice", max_chars=NOTICE_MAX_CHARS)


def message_id_check(message_id: Any) -> str:
    return text_check(message_id, name="message_id", max_chars=MESSAGE_ID_MAX_CHARS, min_chars=1)


def strings_check(value: Any, *, name: str) -> Any:
    """Return a parsed JSON document when none of its strings (keys too) holds NUL or a lone
    surrogate, else raise: every text field of a client's frame, whatever it is for."""
    if isinstance(value, str):
        storable_check(value, name=name)
    elif isinstance(value, dict):
        for key, item in value.items():
            storable_check(key, name=name)
            strings_check(item, name=name)
    elif isinstance(value, list):
        for item in value:
            strings_check(item, name=name)
    return value


def seq_check(value: Any, *, name: str) -> int:
    """A sequence number given as text or int: 0..SEQ_MAX."""
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise InputInvalid(f"{name} must be a whole number") from None
    if not 0 <= number <= SEQ_MAX:
        raise InputInvalid(f"{name} must be between 0 and {SEQ_MAX}")
    return number


def json_nesting_depth(text: str, *, stop_above: int | None = None) -> int:
    """How deep the arrays and objects of a JSON text nest (0 for a scalar); once past
    `stop_above`, the depth reached so far.

    A fixed number of passes over the text, each linear and done in C, with no regular
    expression at all, so nothing can backtrack whatever the text holds (an unclosed string
    of `\\"`, a megabyte of `[]`):
    1. escapes go: `\\\\` pairs first (a run of backslashes pairs up from its left end, as
       in the parser), then every `\\"`, so a quote left is one that opens or closes a string;
    2. strings go: of the text split at its quotes, the pieces between a closing and the
       next opening quote are kept (the first, the third, ...); an unclosed string's tail
       is dropped with it;
    3. all but the brackets go, and brackets become steps up and down;
    4. the running sum of the steps, whose maximum is the depth, taken a block at a time so
       that a text deep from its start stops early.
    On text that is not JSON the number means little, and the parser that runs next refuses
    the text anyway.
    """
    unescaped = text.replace("\\\\", "").replace('\\"', "")
    outside_strings = "".join(unescaped.split('"')[::2])
    steps = outside_strings.encode("utf-8", "surrogatepass").translate(
        _JSON_STEPS, _JSON_NOT_BRACKETS
    )
    # Openers are 2 and closers 0: after n brackets the sum is 2*opened, and opened minus
    # closed is that sum minus n.
    deepest = total = 0
    for start in range(0, len(steps), _JSON_STEPS_BLOCK):
        block = steps[start : start + _JSON_STEPS_BLOCK]
        sums = accumulate(block, initial=total)
        levels = map(operator.sub, sums, count(start))
        deepest = max(deepest, max(levels))
        if stop_above is not None and deepest > stop_above:
            break
        total += sum(block)
    return deepest


def json_too_deep(text: str) -> bool:
    """Whether the arrays and objects of a JSON text nest deeper than JSON_MAX_DEPTH.

    Python's parser recurses once per level and fails with RecursionError (not ValueError)
    on deep input, so nesting is measured before parsing, in time linear in the text
    (`json_nesting_depth`). Text with too few brackets to nest that deep, nearly every
    frame, is not scanned at all.
    """
    if text.count("[") + text.count("{") <= JSON_MAX_DEPTH:
        return False
    return json_nesting_depth(text, stop_above=JSON_MAX_DEPTH) > JSON_MAX_DEPTH


def json_loads(text: str | bytes) -> Any:
    """json.loads that refuses documents nested deeper than JSON_MAX_DEPTH (JsonTooDeep)."""
    if isinstance(text, bytes):
        text = text.decode("utf-8")
    if json_too_deep(text):
        raise JsonTooDeep(f"JSON may nest at most {JSON_MAX_DEPTH} levels deep")
    return json.loads(text)


def document_storable_check(document: Any, *, name: str) -> Any:
    """Return a parsed JSON document when none of its strings, keys included, holds NUL or a
    lone surrogate, else raise naming where (`name.key[2]`): a request body is refused whole,
    as a WebSocket frame is (`strings_check`), whichever of its fields would be kept.

    One pass over the values with a stack of its own, however deep the document.
    """
    pending: list[tuple[Any, str]] = [(document, name)]
    while pending:
        value, where = pending.pop()
        if isinstance(value, str):
            storable_check(value, name=where)
        elif isinstance(value, dict):
            for key, item in value.items():
                storable_check(key, name=f"a key of {where}")
                pending.append((item, f"{where}.{key}"))
        elif isinstance(value, list):
            pending.extend((item, f"{where}[{index}]") for index, item in enumerate(value))
    return document
