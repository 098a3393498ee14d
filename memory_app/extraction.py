"""Pure functions that read turns: task kinds, profile facts, procedure steps.

No database and no model: consolidation and episode recording call these, and tests can
feed them any text. Everything here is deterministic, so consolidating twice reaches the
same conclusions twice.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

CONVERSATION = "conversation"

# Tool names are matched by fragment so that "calculator", "calculate" and "math_eval" all
# mean arithmetic; the first tool of a turn that matches decides the kind.
_TOOL_KINDS = (
    ("arithmetic", ("calc", "math", "arith", "compute", "eval")),
    ("time", ("time", "clock", "date", "now")),
    ("wait", ("wait", "sleep", "timer", "delay")),
    ("memory", ("remember", "recall", "memory", "memo")),
    ("lookup", ("search", "lookup", "fetch", "browse", "web")),
)
_TEXT_KINDS = (
    (
        "arithmetic",
        re.compile(
            r"\d\s*(?:[-+*/×÷^x]|\bplus\b|\bminus\b|\btimes\b|\bdivided by\b)\s*\(?-?\d"
            r"|\b(?:calculate|compute|square root|sum of|product of)\b",
            re.I,
        ),
    ),
    (
        "time",
        re.compile(
            r"\b(?:what time|the time|time is it|current time|what day|today's date|date today"
            r"|what date)\b",
            re.I,
        ),
    ),
    ("wait", re.compile(r"\b(?:wait|sleep|pause)\b(?:\s+for)?\s+\d", re.I)),
    ("memory", re.compile(r"\b(?:remember|recall|don't forget|what did i tell you)\b", re.I)),
)


def classify_task(request: str, tools_used: Sequence[str]) -> str:
    """The kind of task a turn was: by the tools it used, else by the wording of the request."""
    for tool in tools_used:
        lowered = tool.lower()
        for kind, fragments in _TOOL_KINDS:
            if any(fragment in lowered for fragment in fragments):
                return kind
    for kind, pattern in _TEXT_KINDS:
        if pattern.search(request or ""):
            return kind
    return CONVERSATION


@dataclass(frozen=True)
class FactCandidate:
    key: str
    text: str
    confidence: float


_VALUE = r"(?P<value>[^.!?;,\n]+)"
_SENTENCE_SPLIT = re.compile(r"(?<=[.!?;\n])\s*")
# Where a value's clause ends. It is tried only where a run of spaces begins (the
# lookbehind) and takes the run whole (`\s++`): tried from every space of a long run, it cost
# the square of the run (a name followed by 40,000 spaces took 40 s).
_VALUE_CUT = re.compile(r"(?<!\s)\s++(?:and|but|so|because|which|who)\s.*$", re.I)

_NAME = re.compile(rf"\b(?:my name is|my name's|call me|i am called|i'm called)\s+{_VALUE}", re.I)
_HOME = re.compile(
    rf"\b(?:i live in|i'm living in|i am living in|i'm based in|i am based in)\s+{_VALUE}", re.I
)
_ORIGIN = re.compile(rf"\b(?:i'm from|i am from|i come from)\s+{_VALUE}", re.I)
_FAVORITE = re.compile(r"\bmy favou?rite\s+(?P<slot>[\w' -]{1,40}?)\s+is\s+" + _VALUE, re.I)
_REMEMBER_MY = re.compile(
    r"\bremember(?: that)?\s+my\s+(?P<slot>[\w' -]{1,40}?)\s+(?:is|are)\s+" + _VALUE, re.I
)
_LIKES = re.compile(
    r"\bi\s+(?:really\s+|also\s+|do\s+)?(?P<verb>like|love|enjoy|prefer)\s+" + _VALUE, re.I
)
_VERB_TEXT = {"like": "likes", "love": "loves", "enjoy": "enjoys", "prefer": "prefers"}


def _clean_value(raw: str) -> str:
    value = _VALUE_CUT.sub("", raw.strip())
    value = value.strip(" \"'`")
    return value[:80].strip()


def normalize_key(text: str) -> str:
    """Lower case, punctuation gone, single spaces: 'Green  Tea!' and 'green tea' are one key."""
    return " ".join(re.sub(r"[^\w\s-]", " ", text.lower()).split())


def extract_facts(text: str) -> list[FactCandidate]:
    """Statements about the user in one message, in the order they were made.

    Questions are skipped ("is my name Bob?" teaches nothing); a slot filled twice in one
    message keeps both candidates and the later one wins when they are stored.
    """
    facts: list[FactCandidate] = []
    for sentence in _SENTENCE_SPLIT.split(text or ""):
        sentence = sentence.strip()
        if not sentence or sentence.endswith("?"):
            continue
        remembered = _REMEMBER_MY.search(sentence)
        if remembered:
            slot = normalize_key(remembered["slot"])
            value = _clean_value(remembered["value"])
            if slot and value:
                key = "name" if slot == "name" else f"my:{slot}"
                facts.append(FactCandidate(key, f"The user's {slot} is {value}.", 0.95))
                continue
        if match := _NAME.search(sentence):
            if value := _clean_value(match["value"]):
                facts.append(FactCandidate("name", f"The user's name is {value}.", 0.9))
        if match := _HOME.search(sentence):
            if value := _clean_value(match["value"]):
                facts.append(FactCandidate("home", f"The user lives in {value}.", 0.85))
        if match := _ORIGIN.search(sentence):
            if value := _clean_value(match["value"]):
                facts.append(FactCandidate("origin", f"The user is from {value}.", 0.85))
        if match := _FAVORITE.search(sentence):
            slot = normalize_key(match["slot"])
            value = _clean_value(match["value"])
            if slot and value:
                facts.append(
                    FactCandidate(
                        f"favorite:{slot}", f"The user's favorite {slot} is {value}.", 0.85
                    )
                )
        for match in _LIKES.finditer(sentence):
            value = _clean_value(match["value"])
            if value and normalize_key(value):
                verb = _VERB_TEXT[match["verb"].lower()]
                facts.append(
                    FactCandidate(f"likes:{normalize_key(value)}", f"The user {verb} {value}.", 0.7)
                )
    return facts


def collapse_repeats(tools: Iterable[str]) -> tuple[str, ...]:
    """['calc', 'calc', 'time'] -> ('calc', 'time'): repeating a step is still one step."""
    collapsed: list[str] = []
    for tool in tools:
        if not collapsed or collapsed[-1] != tool:
            collapsed.append(tool)
    return tuple(collapsed)


def procedure_steps(tool_sequences: Sequence[Sequence[str]]) -> list[dict]:
    """Steps of the way a task kind was done most often; empty when no tool was ever used.

    The most frequent (collapsed) tool sequence wins; on a tie the most recent one, since
    `tool_sequences` comes oldest first.
    """
    sequences = [collapse_repeats(tools) for tools in tool_sequences]
    counts = Counter(sequence for sequence in sequences if sequence)
    if not counts:
        return []
    best = max(
        counts,
        key=lambda sequence: (
            counts[sequence],
            max(i for i, s in enumerate(sequences) if s == sequence),
        ),
    )
    steps = [{"tool": tool, "text": f"Call the `{tool}` tool."} for tool in best]
    steps.append({"tool": "", "text": "Answer the user with the result."})
    return steps
