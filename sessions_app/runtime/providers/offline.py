"""The offline model: deterministic, no network, good enough to exercise every path.

It reads the same validated projection a real provider would receive, so a history it
accepts is one OpenAI accepts too. On a new user message it calls the tools the message asks
for (several in one step when it asks for several things); once results are in, it answers
from them. Text streams word by word; usage is estimated at ~4 characters per token.
"""

from __future__ import annotations

import asyncio
import json
import math
import re
import uuid
from collections.abc import Callable, Iterator, Sequence

from sessions_app.runtime.context.attachments import blind_parts
from sessions_app.runtime.context.history import (
    project_anthropic,
    project_openai,
    validate_anthropic,
    validate_openai,
)
from sessions_app.runtime.providers.base import AbortFlag, ModelReply, ToolSpec
from sessions_app.store.base import EntryRecord

# Every pattern reads a whole prompt (up to 100,000 characters) on the event loop, so each
# is linear in it (docs/design.md §27): runs are possessive (`*+`, `++`), so a failed attempt
# never tries every shorter run again; an attempt cannot begin in the middle of a run of
# digits or spaces (a lookbehind refuses in O(1) what the run's start refused);
# a key is at most KEY_CHARS long; a lookahead for " and " is tried only where a run of
# spaces begins; and a pattern whose free text may fail at the end of its line takes the
# rest of that line instead (`|.*+`, the match then has no text), so the next attempt starts
# on the next line rather than rescanning this one from each later start.
KEY_CHARS = 60
_KEY = rf"([\w][\w ]{{0,{KEY_CHARS - 1}}}?)"
_AND_OR_END = r"(?=(?<!\s)\s++and\s|[.!?]|$)"
_AND_OR_CLAUSE_END = r"(?=(?<!\s)\s++and\s|[.!?,]|$)"
_NUMBER = r"-?+\d++(?:\.\d++)?+"
# Spaces after the last number or bracket are left out of the match (they are stripped from
# the expression anyway), so a match ends on a bracket or a digit and the next attempt may
# always begin at the first character of a run.
ARITHMETIC = re.compile(
    rf"(?<![(\s])[(\s]*+(?<!\d){_NUMBER}"
    rf"(?:[)\s]*+(?:\*\*|[-+*/%^×÷])[(\s]*+{_NUMBER})++(?:\s*+\))*+"
)
REMEMBER = re.compile(rf"remember that my {_KEY} is ([^.!?]+?){_AND_OR_END}")
FORGET = re.compile(rf"forget my {_KEY}{_AND_OR_CLAUSE_END}")
RECALL = re.compile(rf"what(?:'s| is) my {_KEY}{_AND_OR_CLAUSE_END}")
CLOCK = re.compile(r"\b(?:what time|the time|time is it|clock|what day|today's date|the date)\b")
WAIT = re.compile(
    r"\b(?:wait|sleep)(?:\s++for)?+\s++(\d++(?:\.\d++)?+)\s*+(?:s\b|secs?\b|seconds?\b)?"
)
PREVIOUS = re.compile(r"what did i (?:just )?(?:say|ask)")
# "ask researcher to compute 6*7": the task runs to the end of the sentence; on a line with
# no sentence end (and not the last), there is no task (the `task` group is None).
DELEGATE = re.compile(
    r"\bask\s++([a-z0-9][a-z0-9_-]*+)\s++to\s++"
    r"(?:(?P<task>.+?)(?<!\s)\s*+(?=[.!?](?:\s|$)|$)|.*+)"
)

# Schedules: "remind me in 10 seconds to stretch", "every 2 hours remind me to drink water",
# "in 30 seconds, what is 6*7" (a prompt run later), and their cancellation.
_AMOUNT = r"(?P<n>\d+(?:\.\d+)?|an?|one)"
_UNIT = r"(?P<u>seconds?|secs?|minutes?|mins?|hours?|hrs?|days?)"
_LINK = r"(?:to |that |about |of )?"
_TEXT = r"(?P<text>.+)"
SCHEDULES = [
    ("reminder", True, re.compile(rf"\bevery (?:{_AMOUNT} )?{_UNIT},? remind me {_LINK}{_TEXT}")),
    ("reminder", True, re.compile(rf"\bremind me every (?:{_AMOUNT} )?{_UNIT},? {_LINK}{_TEXT}")),
    ("reminder", False, re.compile(rf"\bremind me in {_AMOUNT} {_UNIT},? {_LINK}{_TEXT}")),
    (
        "reminder",
        False,
        re.compile(rf"\bremind me {_LINK}(?:(?P<text>.+?) in {_AMOUNT} {_UNIT}\W*+$|.*+)"),
    ),
    ("prompt", True, re.compile(rf"^\W*every (?:{_AMOUNT} )?{_UNIT},?\s+{_TEXT}")),
    ("prompt", False, re.compile(rf"^\W*in {_AMOUNT} {_UNIT},?\s+{_TEXT}")),
]
UNSCHEDULE_ID = re.compile(
    r"\b(?:cancel|delete|remove|stop) (?:the |my )?(?:reminder|schedule) #?(\d+)"
)
UNSCHEDULE_ALL = re.compile(
    r"\b(?:cancel|delete|remove|stop|clear) (?:all (?:of )?)?(?:my |the )?(?:reminders|schedules)\b"
)
UNSCHEDULE_TEXT = re.compile(
    r"\b(?:(?:cancel|delete|remove) (?:the |my )?(?:reminder|schedule) (?:to |about |for |of )?"
    r"|stop reminding me (?:to |about |of )?)(?P<text>.+)"
)
# A goal's check-in tools (docs/design.md §25).
# The sandbox's tool: runtime.sandbox.base takes its name from here (the providers are
# below the sandbox, which runs a turn's tools).
RUN_CODE = "run_code"
GOAL_DONE = "goal_done"
GOAL_UPDATE = "goal_update"
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_UNIT_NAMES = {"m": "minutes", "h": "hours", "d": "days", "s": "seconds"}

CAPABILITIES = (
    'I am the offline model: I can calculate ("what is 2+3"), tell the time, wait '
    '("wait 2 seconds"), remember things ("remember that my color is blue") and forget '
    'them once you allow it ("forget my color"), set reminders ("remind me in 10 minutes '
    'to stretch"), and hand a task to a sub-agent ("ask researcher to compute 6*7").'
)


def estimate_tokens(text: str) -> int:
    return max(1, math.ceil(len(text) / 4))


def _delegation_targets(tools: Sequence[ToolSpec]) -> dict[str, str]:
    """Lowercased name -> name of the agents the `delegate` tool's schema offers."""
    for tool in tools:
        if tool.name == "delegate":
            names = tool.parameters.get("properties", {}).get("agent", {}).get("enum", [])
            return {name.lower(): name for name in names}
    return {}


def code_to_run(text: str) -> dict | None:
    """`run python: <code>` / `run bash: <code>` (docs/design.md §28): run_code's arguments —
    the rest of the message, a Markdown fence around it taken off — or None."""
    stripped = text.lstrip()
    for language in ("python", "bash"):
        prefix = f"run {language}:"
        if stripped[: len(prefix)].lower() == prefix:
            return {"language": language, "code": _unfenced(stripped[len(prefix) :])}
    return None


def _unfenced(code: str) -> str:
    lines = code.strip().splitlines()
    if len(lines) >= 2 and lines[0].startswith("```") and lines[-1].strip() == "```":
        lines = lines[1:-1]
    return "\n".join(lines).strip("\n") + "\n"


def _intents(
    text: str, offered: set[str], agents: dict[str, str] | None = None
) -> list[tuple[int, str, dict]]:
    """(position, tool, arguments) for every request in the text, in reading order."""
    code = code_to_run(text)
    if code is not None:
        # The whole message is the program: its digits are not arithmetic to do here.
        return [(0, RUN_CODE, code)] if RUN_CODE in offered else []
    lowered = text.lower()
    found: list[tuple[int, str, dict]] = []
    taken: list[tuple[int, int]] = []

    def add(match, name, arguments):
        if name in offered and not any(s < match.end() and match.start() < e for s, e in taken):
            found.append((match.start(), name, arguments))
            taken.append((match.start(), match.end()))

    # First: a line `call <tool> <json arguments>` calls that tool, any the turn offers
    # (docs/design.md §31).
    for span, name, arguments in _explicit_calls(text):
        add(span, name, arguments)
    # A delegated task is the sub-agent's to read, not a request to act on here.
    for match in DELEGATE.finditer(lowered):
        agent = (agents or {}).get(match.group(1))
        if agent is not None and match.group("task") is not None:
            task = text[match.start("task") : match.end("task")].strip()
            add(match, "delegate", {"agent": agent, "task": task})

    for kind, repeats, pattern in SCHEDULES:
        if match := _first_with_text(pattern, lowered):
            add(match, "schedule", _schedule_arguments(text, match, kind=kind, repeats=repeats))
            break
    if match := (
        UNSCHEDULE_ID.search(lowered)
        or UNSCHEDULE_ALL.search(lowered)
        or UNSCHEDULE_TEXT.search(lowered)
    ):
        add(match, "unschedule", _unschedule_arguments(text, match))
    for match in REMEMBER.finditer(lowered):
        key = match.group(1).strip()
        value = text[match.start(2) : match.end(2)].strip()
        add(match, "remember", {"key": key, "value": value})
    for match in FORGET.finditer(lowered):
        add(match, "forget", {"key": match.group(1).strip()})
    for match in RECALL.finditer(lowered):
        add(match, "recall", {"key": match.group(1).strip()})
    for match in WAIT.finditer(lowered):
        add(match, "wait", {"seconds": float(match.group(1))})
    for match in ARITHMETIC.finditer(text):
        expression = match.group(0).strip()
        if re.search(r"\d\s*(?:\*\*|[-+*/%^×÷])", expression):
            add(match, "calculator", {"expression": expression})
    for match in CLOCK.finditer(lowered):
        add(match, "clock", {})
    return sorted(found, key=lambda item: item[0])


class _Span:
    """Where a request is in the prompt, as the patterns' matches say it."""

    def __init__(self, start: int, end: int):
        self._start, self._end = start, end

    def start(self) -> int:
        return self._start

    def end(self) -> int:
        return self._end


_JSON = json.JSONDecoder()


def _explicit_calls(text: str) -> Iterator[tuple[_Span, str, dict]]:
    """Each line `call <tool> <json object>`: one pass over the text, the JSON read once by
    the standard decoder (linear in its length)."""
    offset = 0
    for line in text.splitlines(keepends=True):
        start = offset
        offset += len(line)
        words = line.lstrip().split(None, 2)
        if len(words) < 2 or words[0].lower() != "call":
            continue
        try:
            arguments, _ = _JSON.raw_decode(words[2].strip()) if len(words) == 3 else ({}, 0)
        except ValueError:
            continue
        if isinstance(arguments, dict):
            yield _Span(start, offset), words[1], arguments


def _first_with_text(pattern: re.Pattern, lowered: str) -> re.Match | None:
    """The first match of a schedule pattern that found a text (one that took the rest of
    its line instead found none)."""
    return next((match for match in pattern.finditer(lowered) if match.group("text")), None)


def _schedule_arguments(text: str, match: re.Match, *, kind: str, repeats: bool) -> dict:
    amount = match.group("n") or "1"
    number = 1.0 if amount in {"a", "an", "one"} else float(amount)
    unit = match.group("u")[0]  # s, m, h, d
    what = text[match.start("text") : match.end("text")].strip().rstrip(".! ").strip()
    arguments: dict = {"text": what, "kind": kind}
    if repeats:
        arguments.update(every=int(number), unit=_UNIT_NAMES[unit])
    else:
        arguments["in_seconds"] = number * _UNIT_SECONDS[unit]
    return arguments


def _unschedule_arguments(text: str, match: re.Match) -> dict:
    if match.re is UNSCHEDULE_ID:
        return {"id": int(match.group(1))}
    if match.re is UNSCHEDULE_ALL:
        return {"all": True}
    return {"text": text[match.start("text") : match.end("text")].strip().rstrip(".!? ")}


def _run_sentence(result: str) -> str:
    """A run's JSON result (runtime.sandbox.run_code) in a few words and its output."""
    try:
        # The JSON comes first; a model that cannot see images has "[image: …]" after it.
        run, _ = json.JSONDecoder().raw_decode(result)
    except ValueError:
        return f"run_code: {result}"
    if run.get("killed"):
        said = f"The run was stopped ({run['killed']})."
    else:
        said = f"The code ran (exit code {run.get('exit_code')})."
    output = (run.get("stdout") or "") + (run.get("stderr") or "")
    if output.strip():
        said += f"\n\n```\n{output.strip()}\n```"
    if run.get("files"):
        said += "\n\nFiles: " + ", ".join(file["path"] for file in run["files"]) + "."
    return said


def _sentence_for(name: str, arguments: dict, result: str, is_error: bool) -> str:
    if is_error:
        return f"The {name} tool failed: {result}"
    if name == RUN_CODE:
        return _run_sentence(result)
    if name == "calculator":
        return f"{arguments.get('expression', '?')} = {result}."
    if name == "clock":
        return f"It is {result}."
    if name == "wait":
        return f"I {result}."
    if name == "remember":
        return f"Noted: your {arguments.get('key')} is {arguments.get('value')}."
    if name == "forget":
        if result.startswith("forgot "):
            return f"I forgot your {arguments.get('key')}."
        return f"I had nothing under your {arguments.get('key')}."
    if name == "delegate":
        return f"{arguments.get('agent', 'The sub-agent')} says: {result}"
    if name == "recall":
        key = arguments.get("key")
        if result.startswith(f"{key} = "):
            return f"Your {key} is {result.split(' = ', 1)[1]}."
        return f"I don't know your {key} yet."
    if name == "schedule":
        return f"OK, {result}."
    if name == GOAL_DONE:
        return f"Goal done: {arguments.get('result', '')}"
    if name == GOAL_UPDATE:
        return f"Noted for the goal: {arguments.get('note', '')}"
    if name == "unschedule":
        return (
            "There was no active schedule to cancel."
            if result.startswith("no ")
            else f"Done: {result}."
        )
    return f"{name}: {result}"


class OfflineProvider:
    label = "offline"
    model = "offline"

    @property
    def parameters(self) -> dict:
        return {}

    def parameters_for(self, thinking: str) -> dict:  # noqa: ARG002 - it does not think
        """The offline model has no settings, and ignores thinking."""
        return {}

    def request_body(self, *, entries, system_prompt, tools, parameters=None) -> dict:  # noqa: ARG002
        """What the offline model reads: the Anthropic projection (which keeps `is_error`)
        and the tools it may call. Nothing goes over a wire; a replay shows this."""
        _, messages = project_anthropic(entries, system_prompt, files=blind_parts)
        return {
            "model": self.model,
            "system": system_prompt,
            "messages": messages,
            "tools": [tool.as_dict() for tool in tools],
        }

    def _plan(self, entries, system_prompt, tools) -> tuple[ModelReply | None, str, int]:
        """Either a reply with tool calls, or the text to stream; and the input tokens."""
        # Both projections are validated: the offline model refuses exactly what either
        # real provider would refuse. It reads the Anthropic shape, which keeps is_error.
        validate_openai(project_openai(entries, system_prompt))
        _, messages = project_anthropic(entries, system_prompt, files=blind_parts)
        validate_anthropic(messages)
        input_tokens = estimate_tokens(system_prompt + json.dumps(messages, ensure_ascii=False))
        last = messages[-1]["content"]
        texts = [block["text"] for block in last if block["type"] == "text"]
        if not texts:
            answer = self._answer_from_results(messages[-2]["content"], last)
            uses = messages[-2]["content"]
            if finished := self._goal_finished(uses, last, tools, answer, input_tokens):
                return finished, "", input_tokens
            return None, answer, input_tokens
        request = texts[-1]
        calls = [
            {"id": f"call_{uuid.uuid4().hex[:24]}", "name": name, "arguments": json.dumps(args)}
            for _, name, args in _intents(
                request, {tool.name for tool in tools}, _delegation_targets(tools)
            )
        ]
        if calls:
            output = sum(estimate_tokens(call["arguments"]) for call in calls)
            reply = ModelReply(
                tool_calls=calls,
                usage={"input_tokens": input_tokens, "output_tokens": output},
                model=self.model,
            )
            return reply, "", input_tokens
        return None, self._answer_from_conversation(messages, request), input_tokens

    def _goal_finished(
        self, uses, results, tools, answer: str, input_tokens: int
    ) -> ModelReply | None:
        """At a goal's check-in (the `goal_done` tool is offered), tools that worked out what
        the goal asked (arithmetic, the time) finish it: their answer is the result."""
        if GOAL_DONE not in {tool.name for tool in tools}:
            return None
        called = {block["name"] for block in uses if block["type"] == "tool_use"}
        if called & {GOAL_DONE, GOAL_UPDATE} or any(block.get("is_error") for block in results):
            return None
        arguments = json.dumps({"result": answer})
        return ModelReply(
            tool_calls=[
                {"id": f"call_{uuid.uuid4().hex[:24]}", "name": GOAL_DONE, "arguments": arguments}
            ],
            usage={"input_tokens": input_tokens, "output_tokens": estimate_tokens(arguments)},
            model=self.model,
        )

    def _streamed(self, text: str, input_tokens: int, pieces: list[str]) -> ModelReply:
        stopped = len(pieces) < len(text.split(" "))
        return ModelReply(
            text="".join(pieces).rstrip() if stopped else text,
            usage={
                "input_tokens": input_tokens,
                "output_tokens": 0 if stopped else estimate_tokens(text),
            },
            model=self.model,
            stopped=stopped,
        )

    def complete(
        self,
        *,
        entries: Sequence[EntryRecord],
        system_prompt: str,
        tools: Sequence[ToolSpec],
        on_delta: Callable[[str], None],
        abort: AbortFlag,
        parameters: dict | None = None,  # noqa: ARG002 - the offline model has none
    ) -> ModelReply:
        reply, text, input_tokens = self._plan(entries, system_prompt, tools)
        if reply is not None:
            return reply
        pieces: list[str] = []
        for piece in _words(text):
            if abort.is_set():
                break
            pieces.append(piece)
            on_delta(piece)
        return self._streamed(text, input_tokens, pieces)

    async def acomplete(
        self,
        *,
        entries: Sequence[EntryRecord],
        system_prompt: str,
        tools: Sequence[ToolSpec],
        on_delta: Callable[[str], None],
        abort: AbortFlag,
        parameters: dict | None = None,  # noqa: ARG002 - the offline model has none
    ) -> ModelReply:
        reply, text, input_tokens = self._plan(entries, system_prompt, tools)
        if reply is not None:
            return reply
        pieces: list[str] = []
        for piece in _words(text):
            if abort.is_set():
                break
            pieces.append(piece)
            on_delta(piece)
            await asyncio.sleep(0)  # streaming lets the other turns of the worker run
        return self._streamed(text, input_tokens, pieces)

    @staticmethod
    def _answer_from_results(uses: list[dict], results: list[dict]) -> str:
        calls = {block["id"]: block for block in uses if block["type"] == "tool_use"}
        sentences = []
        for block in results:
            use = calls.get(block["tool_use_id"], {"name": "tool", "input": {}})
            content = block["content"]
            if isinstance(content, list):  # a result with images: its text comes first
                content = " ".join(part["text"] for part in content if part["type"] == "text")
            sentences.append(
                _sentence_for(use["name"], use["input"], content, block.get("is_error", False))
            )
        return " ".join(sentences)

    @staticmethod
    def _answer_from_conversation(messages: list[dict], request: str) -> str:
        earlier = [
            block["text"]
            for message in messages
            if message["role"] == "user"
            for block in message["content"]
            if block["type"] == "text" and block["text"] != request
        ]
        if PREVIOUS.search(request.lower()):
            if earlier:
                return f"You said: “{earlier[-1]}”."
            return "This is the first thing you said in this conversation."
        return f"You said: “{request.strip()}”. {CAPABILITIES}"


def _words(text: str) -> Iterator[str]:
    for index, word in enumerate(text.split(" ")):
        yield word if index == 0 else " " + word
