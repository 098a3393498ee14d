"""Agent definitions: who answers in a session, with which prompt, tools and model.

Every session names its agent (fixed at creation). An agent is defined in code (the
defaults below) and, optionally, in a TOML file named by JARVIS_AGENTS_FILE, whose tables are
merged over the defaults key by key:

    [agents.researcher]
    model = "anthropic:claude-sonnet-4-5"

    [agents.coder]
    description = "Writes and reviews small programs."
    system_prompt = "You are a careful programmer."
    tools = ["calculator"]
    memory = { stm = "per_task" }

An agent that holds the `delegate` tool is a main agent: it hands tasks to the others and is
never handed one itself, so delegation is one level deep. The `memory.stm` policy says which
session — and so which working memory — a delegated task runs in (see `subagent_session_id`).
A session whose agent is not defined gets Jarvis' definition under its own name.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import tomllib
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from jarvis_site.shared.errors import Code, DomainError
from sessions_app.core.ids import SUBAGENT_PREFIX, validate_session_id
from sessions_app.runtime.mcp.offer import mcp_tools
from sessions_app.runtime.providers import check_model_spec
from sessions_app.runtime.sandbox.base import RUN_CODE
from sessions_app.runtime.sandbox.registry import sandbox_offered
from sessions_app.runtime.tools.base import Tool
from sessions_app.runtime.tools.registry import DELEGATE, TOOLS

MAIN_AGENT = "jarvis"
PER_PARENT_SESSION = "per_parent_session"
PER_TASK = "per_task"
PER_AGENT = "per_agent"
STM_POLICIES = (PER_PARENT_SESSION, PER_TASK, PER_AGENT)
# A name ends up inside session ids (`agent_<name>__<parent id>`): no "__", which separates
# the name from the rest, and short enough to leave room for the parent's id.
AGENT_NAME_RE = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]|_(?!_)){0,39}")
SESSION_ID_MAX = 200
HASH_CHARS = 16

_BASE_TOOLS = ("calculator", "clock", "wait", "remember", "recall")
# The main agent's reminders and scheduled prompts (registered by notices_app).
_SCHEDULE_TOOLS = ("schedule", "unschedule")
# A goal's check-ins report with these (registered by notices_app, docs/design.md §25).
_GOAL_TOOLS = ("goal_update", "goal_done")
GOAL_AGENT = "goal"


@dataclass(frozen=True)
class AgentDefinition:
    name: str
    description: str
    system_prompt: str
    tools: tuple[str, ...]
    model: str = ""  # "" = the session's model, else JARVIS_MODEL
    stm: str = PER_PARENT_SESSION  # memory.stm: the session a delegated task runs in
    # False for an agent that only the platform starts (a goal's): never a delegate target.
    delegable: bool = True

    @property
    def is_main(self) -> bool:
        return DELEGATE in self.tools


DEFAULT_AGENTS: dict[str, AgentDefinition] = {
    agent.name: agent
    for agent in [
        AgentDefinition(
            name=MAIN_AGENT,
            description="The personal assistant the user talks to.",
            system_prompt=(
                "You are Jarvis, a personal assistant. Answer briefly and truthfully. Use a "
                "tool when it gives a better answer than guessing (arithmetic, the current "
                "time, the user's working memory). Hand a self-contained task to a sub-agent "
                "with `delegate` when one fits it better. When a tool fails, say so instead "
                "of inventing its result."
            ),
            tools=(*_BASE_TOOLS, "forget", DELEGATE, *_SCHEDULE_TOOLS),
        ),
        AgentDefinition(
            name="researcher",
            description=(
                "Looks things up and works them out; remembers its findings for the rest of "
                "the conversation that asked."
            ),
            system_prompt=(
                "You are a researcher working for Jarvis. Work the task out with your tools "
                "and answer with the result only, briefly and exactly."
            ),
            tools=_BASE_TOOLS,
            stm=PER_PARENT_SESSION,
        ),
        AgentDefinition(
            name="scratch",
            description="Does one throwaway task and forgets it afterwards.",
            system_prompt=(
                "You are a scratch worker for Jarvis. Do the one task you are given and "
                "answer with its result."
            ),
            tools=_BASE_TOOLS,
            stm=PER_TASK,
        ),
        AgentDefinition(
            name="librarian",
            description=(
                "Keeps notes for the user across every conversation: ask it to remember or "
                "to look something up."
            ),
            system_prompt=(
                "You are the user's librarian. Keep notes with `remember`, find them with "
                "`recall`, and answer briefly."
            ),
            tools=("remember", "recall", "clock", "calculator"),
            stm=PER_AGENT,
        ),
        AgentDefinition(
            name=GOAL_AGENT,
            description="Works on one of the user's goals, one check-in at a time.",
            system_prompt=(
                "You work on a goal the user set, over several check-ins. At each check-in, "
                "do what you can with your tools, then call `goal_update` with a short note "
                "of progress, or `goal_done` with the result once the goal is reached. The "
                "user reads your notes and the result, not this conversation."
            ),
            tools=(*_BASE_TOOLS, *_GOAL_TOOLS),
            stm=PER_TASK,
            delegable=False,
        ),
    ]
}

_KEYS = {"description", "system_prompt", "tools", "model", "memory"}


def _fail(path: Path, where: str, problem: str) -> ImproperlyConfigured:
    return ImproperlyConfigured(f"JARVIS_AGENTS_FILE {path}: {where}: {problem}")


def _text(path: Path, where: str, value: object) -> str:
    if not isinstance(value, str) or not value.strip():
        raise _fail(path, where, "must be a non-empty string")
    return value


def _definition(path: Path, name: str, table: object) -> AgentDefinition:
    """One [agents.<name>] table merged over the default of that name (if there is one)."""
    where = f"[agents.{name}]"
    if not AGENT_NAME_RE.fullmatch(name):
        raise _fail(
            path, where, "an agent name is 1-40 of A-Z a-z 0-9 - _ (no '__'), starting alnum"
        )
    if not isinstance(table, dict):
        raise _fail(path, where, "must be a table")
    unknown = sorted(set(table) - _KEYS)
    if unknown:
        raise _fail(path, where, f"unknown key(s) {', '.join(unknown)}; known: {sorted(_KEYS)}")
    base = DEFAULT_AGENTS.get(name)
    if base is None:
        missing = [key for key in ("description", "system_prompt") if key not in table]
        if missing:
            raise _fail(path, where, f"a new agent needs {' and '.join(missing)}")
        base = AgentDefinition(name=name, description="", system_prompt="", tools=())
    changes: dict = {}
    for key in ("description", "system_prompt"):
        if key in table:
            changes[key] = _text(path, f"{where} {key}", table[key])
    if "tools" in table:
        tools = table["tools"]
        if not isinstance(tools, list) or not all(isinstance(tool, str) for tool in tools):
            raise _fail(path, f"{where} tools", "must be a list of tool names")
        unknown_tools = sorted(set(tools) - set(TOOLS))
        if unknown_tools:
            raise _fail(
                path,
                f"{where} tools",
                f"unknown tool(s) {', '.join(unknown_tools)}; known: {', '.join(sorted(TOOLS))}",
            )
        changes["tools"] = tuple(dict.fromkeys(tools))
    if "model" in table:
        try:
            changes["model"] = check_model_spec(table["model"])
        except ValueError as error:
            raise _fail(path, f"{where} model", str(error)) from error
    if "memory" in table:
        memory = table["memory"]
        if not isinstance(memory, dict) or set(memory) - {"stm"}:
            raise _fail(
                path, f"{where} memory", 'is a table with one key, stm: memory = { stm = "…" }'
            )
        if "stm" in memory:
            if memory["stm"] not in STM_POLICIES:
                raise _fail(path, f"{where} memory.stm", f"is one of {', '.join(STM_POLICIES)}")
            changes["stm"] = memory["stm"]
    return replace(base, **changes)


@lru_cache(maxsize=4)
def _registry(path_text: str) -> dict[str, AgentDefinition]:
    agents = dict(DEFAULT_AGENTS)
    if not path_text:
        return agents
    path = Path(path_text).expanduser()
    try:
        with open(path, "rb") as handle:
            document = tomllib.load(handle)
    except FileNotFoundError as error:
        raise ImproperlyConfigured(f"JARVIS_AGENTS_FILE {path}: no such file") from error
    except tomllib.TOMLDecodeError as error:
        raise ImproperlyConfigured(f"JARVIS_AGENTS_FILE {path}: not valid TOML: {error}") from error
    unknown = sorted(set(document) - {"agents"})
    if unknown:
        raise _fail(
            path, "top level", f"unknown table(s) {', '.join(unknown)}; only [agents.<name>]"
        )
    tables = document.get("agents", {})
    if not isinstance(tables, dict):
        raise _fail(path, "agents", "must be tables [agents.<name>]")
    for name, table in tables.items():
        agents[name] = _definition(path, name, table)
    if not agents[MAIN_AGENT].is_main:
        raise _fail(path, f"[agents.{MAIN_AGENT}]", "the main agent must keep the delegate tool")
    return agents


def agent_registry() -> dict[str, AgentDefinition]:
    """Every defined agent by name: the defaults, with JARVIS_AGENTS_FILE merged over them.

    Raises ImproperlyConfigured naming the file, the table and the problem; the app checks
    this at start-up, so a bad file stops the server instead of failing a turn.
    """
    return _registry(str(settings.JARVIS_AGENTS_FILE or ""))


class UnknownAgent(DomainError, ValueError):
    """A new session names an agent that is not defined (400 `unknown_agent`, close 4400)."""

    code = Code.UNKNOWN_AGENT


def agent_known(name: str) -> str:
    """`name` when it is a defined agent, else UnknownAgent naming the defined ones."""
    agents = agent_registry()
    if name not in agents:
        raise UnknownAgent(f"no agent named {name!r}; defined: {', '.join(sorted(agents))}")
    return name


def agent_get(name: str) -> AgentDefinition:
    """The agent of a session; an undefined name gets Jarvis' definition under that name."""
    agents = agent_registry()
    if name in agents:
        return agents[name]
    main = agents[MAIN_AGENT]
    return replace(main, name=name, system_prompt=main.system_prompt.replace("Jarvis", name, 1))


def delegation_targets() -> list[AgentDefinition]:
    """The agents a main agent may delegate to: every agent that is neither a main agent nor
    one only the platform starts (`delegable=False`, the goal agent)."""
    return [agent for agent in agent_registry().values() if not agent.is_main and agent.delegable]


def agent_tools(agent: AgentDefinition) -> dict[str, Tool]:
    """The tools of a turn of this agent, by name; `delegate` lists the current targets. Then
    the tools of the operator's MCP servers this process has listed (docs/design.md §31)."""
    tools = {}
    for name in agent.tools:
        tool = TOOLS[name]
        if name == DELEGATE:
            tool = _delegate_tool(tool, delegation_targets())
        tools[name] = tool
    # Every agent that has tools may run code, where this server has a sandbox that
    # isolates (docs/design.md §28); elsewhere the tool is not offered at all.
    if tools and RUN_CODE in TOOLS and sandbox_offered():
        tools[RUN_CODE] = TOOLS[RUN_CODE]
    return tools | mcp_tools()


def _delegate_tool(tool: Tool, targets: list[AgentDefinition]) -> Tool:
    # The model reads the names and descriptions; the enum keeps it from inventing agents.
    listing = "; ".join(f"{agent.name}: {agent.description.rstrip('.')}" for agent in targets)
    parameters = {
        **tool.parameters,
        "properties": {
            **tool.parameters["properties"],
            "agent": {
                "type": "string",
                "enum": [agent.name for agent in targets],
                "description": "the sub-agent to ask",
            },
        },
    }
    return replace(
        tool, description=f"{tool.description} Agents: {listing}.", parameters=parameters
    )


def models_configured() -> list[str]:
    """Every model the deployment names — JARVIS_MODEL, TITLE_MODEL, each agent's and the
    ones people pick (JARVIS_MODELS) — once each: what a starting server prepares."""
    named = [
        settings.JARVIS_MODEL,
        settings.TITLE_MODEL,
        *(agent.model for agent in agent_registry().values()),
        *settings.JARVIS_MODELS,
    ]
    return [spec for spec in dict.fromkeys(named) if spec]


def model_for_session(*, agent: str, model: str) -> str:
    """The model a turn uses: the session's own (`model`, set by /model), else its agent's,
    else JARVIS_MODEL."""
    return model or agent_get(agent).model or settings.JARVIS_MODEL


# --- sub-agent session ids ------------------------------------------------------------------


def _fit(prefix: str, tail: str) -> str:
    """prefix + tail, shortened with a hash of the tail when it would pass the id limit.

    Deterministic, so the same parent always finds the same sub-agent session, and distinct
    for parents that share a long common prefix.
    """
    session_id = prefix + tail
    if len(session_id) <= SESSION_ID_MAX:
        return session_id
    digest = hashlib.sha256(tail.encode()).hexdigest()[:HASH_CHARS]
    keep = SESSION_ID_MAX - len(prefix) - len(digest) - 1
    return f"{prefix}{tail[:keep]}-{digest}"


def subagent_session_id(
    agent: AgentDefinition, *, parent_id: str, owner_id: int | None, task_id: str = ""
) -> str:
    """The session a task delegated to `agent` runs in, by its memory.stm policy.

    - per_parent_session: `agent_<name>__<parent id>` — one per calling conversation;
    - per_task: `agent_<name>__task_<task id>` — a fresh one per call;
    - per_agent: `agent_<name>:<owner id>` — one per user, kept across conversations. The
      owner's id is part of it because session ids are global: two users asking the same
      librarian must never share (or be refused) one session. Ownerless system sessions use
      `agent_<name>`.
    Parent ids near the 200-character limit are shortened with a hash (see `_fit`).
    """
    prefix = f"{SUBAGENT_PREFIX}{agent.name}"
    if agent.stm == PER_TASK:
        if not task_id:
            raise ValueError("a per_task sub-agent session needs a task id")
        return validate_session_id(_fit(f"{prefix}__task_", task_id))
    if agent.stm == PER_AGENT:
        return validate_session_id(prefix if owner_id is None else f"{prefix}:{owner_id}")
    return validate_session_id(_fit(f"{prefix}__", parent_id))


def subagent_fallback_session_id(session_id: str, *, owner_id: int | None) -> str:
    """The id a sub-agent session takes when its policy's id is held by another user or
    another agent — a row made before users were refused `agent_` ids (ids.is_reserved).

    `<policy id>.<16 hex>`, the hex keyed with SECRET_KEY over the owner and the policy id:
    the same conversation finds the same session again, and nobody can work it out ahead to
    take it too.
    """
    key = settings.SECRET_KEY.encode()
    digest = hmac.new(key, f"{owner_id}:{session_id}".encode(), hashlib.sha256).hexdigest()
    keep = SESSION_ID_MAX - HASH_CHARS - 1
    return validate_session_id(f"{session_id[:keep]}.{digest[:HASH_CHARS]}")


def per_parent_session_ids(*, parent_id: str, owner_id: int | None) -> list[tuple[str, str]]:
    """(agent name, session id) of every per_parent_session sub-agent `parent_id` may have:
    each policy id, and its fallback for `owner_id`."""
    found = []
    for agent in agent_registry().values():
        if agent.stm == PER_PARENT_SESSION and not agent.is_main:
            session_id = subagent_session_id(agent, parent_id=parent_id, owner_id=None)
            fallback = subagent_fallback_session_id(session_id, owner_id=owner_id)
            found += [(agent.name, session_id), (agent.name, fallback)]
    return found


def is_per_agent_session(session_id: str, agent: str) -> bool:
    """Whether an id is the long-lived per_agent session of `agent` (never cleaned up), or
    the fallback of one."""
    prefix = re.escape(f"{SUBAGENT_PREFIX}{agent}")
    return re.fullmatch(rf"{prefix}(:[0-9]+)?(\.[0-9a-f]{{{HASH_CHARS}}})?", session_id) is not None
