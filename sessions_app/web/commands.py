"""Slash commands typed into the chat (`/help`, `/branch`, ...): parse, call a service, say what
happened. Synchronous; the consumer runs them in a worker thread.

Each command returns a `CommandResult` that the consumer sends as `command_result`
`{command, text, data}` (docs/design.md §8): `text` for people, `data` for the page's script.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from jarvis_site.shared.errors import Code, DomainError
from sessions_app import selectors
from sessions_app.core import limits
from sessions_app.core.command_registry import REGISTERED_COMMANDS
from sessions_app.core.throttles import branch_throttle_wait
from sessions_app.runtime.providers import MODEL_SPEC_HELP
from sessions_app.runtime.turn.agents import model_for_session
from sessions_app.services import cleanup, organize
from sessions_app.services import sessions as session_services
from sessions_app.store import SessionNotFound
from sessions_app.store.base import THINKING_LEVELS


@dataclass(frozen=True)
class CommandResult:
    command: str
    text: str
    data: dict[str, Any] = field(default_factory=dict)


class CommandError(DomainError):
    """A command that cannot run as typed; sent as `error` {code, message}. Its `code` is the
    one the refusal carried (a `DomainError` of a service, a registered command's refusal)."""

    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass(frozen=True)
class _Context:
    session_id: str
    owner_id: int
    args: list[str]


def _help(ctx: _Context) -> CommandResult:
    listed = {name: (usage, about) for name, (_, usage, about) in COMMANDS.items()}
    for name, command in REGISTERED_COMMANDS.items():
        listed[name] = (command.usage, command.about)
    lines = [
        f"/{name}{' ' + usage if usage else ''} — {about}"
        for name, (usage, about) in listed.items()
    ]
    return CommandResult("help", "\n".join(lines), {"commands": sorted(listed)})


def sessions_text(rows: list[dict[str, Any]], current: str | None = None) -> str:
    """Sessions as `/sessions` and `manage.py list_sessions` show them, one per line."""
    lines = []
    for row in rows:
        marker = "▶ " if row["id"] == current else "  "
        parent = f"  ← {row['parent_id']}" if row["parent_id"] else ""
        spawned = f"  ⤷ {row['agent']} for {row['spawned_by']}" if row["spawned_by"] else ""
        title = f" “{row['title']}”" if row["title"] else ""
        lines.append(f"{marker}{row['id']}{title} ({row['last_seq']} entries){parent}{spawned}")
    return "\n".join(lines) or "no sessions yet"


def _sessions(ctx: _Context) -> CommandResult:
    if ctx.args not in ([], ["all"]):
        raise CommandError(Code.BAD_REQUEST, "usage: /sessions [all]")
    sessions = selectors.session_list(owner_id=ctx.owner_id, include_subagents=ctx.args == ["all"])
    return CommandResult(
        "sessions", sessions_text(sessions, ctx.session_id), {"sessions": sessions}
    )


BRANCH_USAGE = "usage: /branch [session id] [at <seq>]"


def _branch_args(args: list[str]) -> tuple[str | None, int | None]:
    """(session id or None, seq or None) from `[session id] [at <seq>]`."""
    at_seq = None
    if len(args) >= 2 and args[-2] == "at":
        if not args[-1].isdigit():
            raise CommandError(Code.BAD_REQUEST, BRANCH_USAGE)
        at_seq = int(args[-1])
        args = args[:-2]
    if len(args) > 1:
        raise CommandError(Code.BAD_REQUEST, BRANCH_USAGE)
    return (args[0] if args else None), at_seq


def _branch(ctx: _Context) -> CommandResult:
    named, at_seq = _branch_args(ctx.args)
    source = named or ctx.session_id
    # A branch is a new session: the same budget as POST …/branch/ (BRANCH_THROTTLE_RATE).
    wait = branch_throttle_wait(ctx.owner_id)
    if wait is not None:
        raise CommandError(
            Code.THROTTLED, f"too many branches; try again in {math.ceil(wait)} seconds"
        )
    try:
        meta = session_services.session_branch(
            session_id=source, owner_id=ctx.owner_id, at_seq=at_seq
        )
    except SessionNotFound as error:
        raise CommandError(Code.NOT_FOUND, f"no session {source!r} of yours to branch") from error
    except DomainError:
        raise  # its own code, as through every door
    except ValueError as error:  # a seq outside the history
        raise CommandError(Code.BAD_REQUEST, str(error)) from error
    return CommandResult(
        "branch",
        f"branched {source} into {meta.id} (a copy of {meta.branched_at_seq} entries); "
        "switching to it",
        # The page opens `switch_to`; the terminal chat continues there.
        {"session": selectors.session_to_api(meta), "switch_to": meta.id},
    )


def _model(ctx: _Context) -> CommandResult:
    if len(ctx.args) > 1:
        raise CommandError(Code.BAD_REQUEST, f"usage: /model [{MODEL_SPEC_HELP}]")
    if not ctx.args:
        meta = selectors.session_get(session_id=ctx.session_id, owner_id=ctx.owner_id)
        model = model_for_session(agent=meta.agent, model=meta.model)
        source = "set for this session" if meta.model else "the default"
        return CommandResult("model", f"model: {model} ({source})", {"model": model})
    meta = session_services.session_configure(
        session_id=ctx.session_id, owner_id=ctx.owner_id, model=ctx.args[0]
    )
    return CommandResult(
        "model",
        f"model: {meta.model} from the next turn on",
        {"model": meta.model, "session": selectors.session_to_api(meta)},
    )


def _think(ctx: _Context) -> CommandResult:
    levels = "|".join(THINKING_LEVELS)
    if len(ctx.args) > 1 or (ctx.args and ctx.args[0] not in THINKING_LEVELS):
        raise CommandError(Code.BAD_REQUEST, f"usage: /think [{levels}]")
    if not ctx.args:
        meta = selectors.session_get(session_id=ctx.session_id, owner_id=ctx.owner_id)
        return CommandResult("think", f"thinking: {meta.thinking}", {"thinking": meta.thinking})
    meta = session_services.session_configure(
        session_id=ctx.session_id, owner_id=ctx.owner_id, thinking=ctx.args[0]
    )
    return CommandResult(
        "think",
        f"thinking: {meta.thinking} from the next turn on",
        {"thinking": meta.thinking, "session": selectors.session_to_api(meta)},
    )


def _rename(ctx: _Context) -> CommandResult:
    if not ctx.args:
        raise CommandError(Code.BAD_REQUEST, "usage: /rename <new title>")
    title = limits.renamed_title_check(" ".join(ctx.args))
    meta = organize.session_organize(session_id=ctx.session_id, owner_id=ctx.owner_id, title=title)
    return CommandResult(
        "rename", f"renamed: {meta.title}", {"session": selectors.session_to_api(meta)}
    )


def _pin(ctx: _Context) -> CommandResult:
    if ctx.args not in ([], ["off"]):
        raise CommandError(Code.BAD_REQUEST, "usage: /pin [off]")
    pinned = not ctx.args
    meta = organize.session_organize(
        session_id=ctx.session_id, owner_id=ctx.owner_id, pinned=pinned
    )
    text = "pinned: listed first" if pinned else "unpinned"
    return CommandResult("pin", text, {"session": selectors.session_to_api(meta)})


def _cleanup(ctx: _Context) -> CommandResult:
    if ctx.owner_id is None:
        # An ownerless conversation (`manage.py chat` without --user) is no one's to clean.
        raise CommandError(
            Code.BAD_REQUEST,
            "/cleanup cleans a user's sessions: start the chat with --user, or run "
            "manage.py cleanup_sessions --all-users",
        )
    if not ctx.args:
        plan = cleanup.cleanup_plan(owner_id=ctx.owner_id)
        sizes = {category: plan.size(category) for category in cleanup.CATEGORIES}
        return CommandResult("cleanup", cleanup.plan_text(plan), {"would_remove": sizes})
    category = ctx.args[0]
    if category not in cleanup.CATEGORIES or ctx.args[1:] not in ([], ["confirm"]):
        raise CommandError(
            Code.BAD_REQUEST, f"usage: /cleanup [{'|'.join(cleanup.CATEGORIES)} confirm]"
        )
    if ctx.args[1:] != ["confirm"]:
        plan = cleanup.cleanup_plan(owner_id=ctx.owner_id)
        return CommandResult(
            "cleanup",
            f"{cleanup.plan_text(plan)}\n(nothing removed: add 'confirm' to remove {category})",
            {"would_remove": {category: plan.size(category)}},
        )
    progress: list[str] = []
    report = cleanup.cleanup_run(
        owner_id=ctx.owner_id, category=category, on_progress=progress.append
    )
    return CommandResult(
        "cleanup",
        "\n".join([*progress, cleanup.report_text(report)]),
        {
            "category": category,
            "removed": report.removed,
            "skipped": [list(item) for item in report.skipped],
        },
    )


def _compact(ctx: _Context) -> CommandResult:
    entry = session_services.session_compact(session_id=ctx.session_id, owner_id=ctx.owner_id)
    data = entry.data or {}
    return CommandResult(
        "compact",
        f"compacted: entries before #{data.get('first_kept_seq')} are now a summary "
        f"({data.get('tokens_before')} tokens before)",
        {"entry": selectors.entry_to_api(entry)},
    )


def _export(ctx: _Context) -> CommandResult:
    fmt = ctx.args[0] if ctx.args else "md"
    if len(ctx.args) > 1 or fmt not in session_services.EXPORT_FORMATS:
        raise CommandError(Code.BAD_REQUEST, "usage: /export [md|json]")
    export = session_services.session_export(
        session_id=ctx.session_id, owner_id=ctx.owner_id, fmt=fmt
    )
    # The page and the user get the download link; where the server keeps files is its own.
    # It is the kept file's, which stays the person's after the session's delete (§31).
    url = selectors.export_url(export.filename)
    return CommandResult(
        "export",
        f"exported {export.filename}: download it from {url}",
        {"filename": export.filename, "url": url},
    )


def _usage_line(label: str, part: dict) -> str:
    usd = "price unknown" if part["cost_usd"] is None else f"${part['cost_usd']:.4f}"
    cached = f" ({part['cached_tokens']} cached)" if part["cached_tokens"] else ""
    return f"{label}: {part['input_tokens']} in{cached} / {part['output_tokens']} out, {usd}"


def _cost(ctx: _Context) -> CommandResult:
    """The numbers of GET …/usage/ (docs/design.md §22), as lines."""
    usage = session_services.session_usage(session_id=ctx.session_id, owner_id=ctx.owner_id)
    lines = [_usage_line(model, row) for model, row in usage["by_model"].items()]
    lines.append(_usage_line("total", usage))  # the session's own calls
    for agent, part in usage["sub_agents"].items():
        lines.append(_usage_line(f"sub-agent {agent}", part))
    if usage["inherited"]["by_model"]:
        lines.append(_usage_line("inherited from the parent (not counted)", usage["inherited"]))
    return CommandResult("cost", "\n".join(lines), usage)


COMMANDS: dict[str, tuple[Callable[[_Context], CommandResult], str, str]] = {
    "help": (_help, "", "this list"),
    "sessions": (
        _sessions,
        "[all]",
        "your sessions, newest first; branches show their parent; all: sub-agents' too",
    ),
    "branch": (
        _branch,
        "[session id] [at <seq>]",
        "copy a conversation (default: this one; at a seq: up to it, with a summary of the "
        "rest) into a new session and switch to it",
    ),
    "model": (_model, "[name]", "show or set this session's model (offline, openai:…)"),
    "think": (
        _think,
        "[off|low|medium|high]",
        "show or set how hard the model thinks (the offline model ignores it)",
    ),
    "rename": (_rename, "<new title>", "rename this conversation"),
    "pin": (_pin, "[off]", "pin this conversation to the top of the list, or unpin it"),
    "cleanup": (
        _cleanup,
        "[agents|tests|stm|connections confirm]",
        "list what can be cleaned up; with a category and confirm, remove it",
    ),
    "compact": (_compact, "", "summarize older turns so the model's context stays small"),
    "export": (_export, "[md|json]", "export the conversation and show its download link"),
    "cost": (_cost, "", "tokens and USD: per model, sub-agents, inherited"),
}


def _registered(name: str, *, session_id: str, owner_id: int, line: str) -> CommandResult:
    # The text after the name as typed (its spacing kept), not the split words.
    text = line.strip().lstrip("/")[len(name) :].strip()
    reply = REGISTERED_COMMANDS[name].handler(session_id=session_id, owner_id=owner_id, text=text)
    return CommandResult(name, reply.text, reply.data)


def command_run(*, session_id: str, owner_id: int, line: str) -> CommandResult:
    """Run one slash command line (`/name args...`) against the caller's session.

    Every refusal is a CommandError: the slash commands' one mapping of a `DomainError` keeps
    its code, the one the HTTP API and the socket answer the same mistake with."""
    try:
        return _command_run(session_id=session_id, owner_id=owner_id, line=line)
    except CommandError:
        raise
    except DomainError as error:
        raise CommandError(error.code, error.detail) from error


def _command_run(*, session_id: str, owner_id: int, line: str) -> CommandResult:
    parts = line.strip().lstrip("/").split()
    if not parts:
        raise CommandError(Code.BAD_REQUEST, "a command name follows the /; /help lists them")
    name, *args = parts
    if name not in COMMANDS and name not in REGISTERED_COMMANDS:
        raise CommandError(Code.UNKNOWN_COMMAND, f"unknown command /{name}; /help lists them")
    # Every command, even one that only reads (/help, /sessions), needs the caller's own
    # session: in anyone else's each is not_found, the answer its service would give.
    selectors.session_get(session_id=session_id, owner_id=owner_id)
    if name not in COMMANDS:
        return _registered(name, session_id=session_id, owner_id=owner_id, line=line)
    handler = COMMANDS[name][0]
    return handler(_Context(session_id=session_id, owner_id=owner_id, args=args))
