"""Delegation: a main agent's `delegate` call runs one whole turn of a sub-agent.

The sub-agent's turn is an ordinary `turn_run` in its own session (lease, pairing, repair —
every session rule holds), owned by the caller's owner, with `spawned_by` naming the
calling session. Which session that is follows the sub-agent's memory.stm policy
(`agents.subagent_session_id`).

Delegation runs a whole turn and the services around it, so it sits above the runtime
(docs/design.md §16): the runtime never imports it, and the `delegate` tool reaches the tool
registry through `tool_register` in sessions_app's AppConfig.ready.
"""

from __future__ import annotations

import asyncio
import logging
import uuid

from sessions_app.runtime.loop.executors import in_pool
from sessions_app.runtime.tools.base import (
    ABORTED_RESULT_TEXT,
    Tool,
    ToolAborted,
    ToolContext,
    TurnAbort,
)
from sessions_app.runtime.tools.registry import DELEGATE
from sessions_app.runtime.turn.agents import (
    PER_TASK,
    AgentDefinition,
    delegation_targets,
    subagent_fallback_session_id,
    subagent_session_id,
)
from sessions_app.runtime.turn.turns import (
    SessionBusy,
    TurnResult,
    turn_abort_async,
    turn_run_async,
)
from sessions_app.runtime.turn.usage import usage_add
from sessions_app.services import broadcasts, deletion
from sessions_app.store import AgentMismatch, SessionNotFound, get_store
from sessions_app.store.usage_ledger import SUB_AGENT, usage_ledger_add

logger = logging.getLogger(__name__)

MAX_TASK_CHARS = 100_000
# How often an abort is offered again to a sub-turn that has not registered itself yet.
RELAY_INTERVAL_SEC = 0.05


async def delegation_run(*, parent_id: str, agent: str, task: str, abort: TurnAbort) -> str:
    """Run `task` as one turn of sub-agent `agent` for session `parent_id`; its final answer.

    Steps: check the agent and the task; open (or create) the sub-agent's session for the
    caller's owner — in its fallback id when the policy's id is owned by someone else or
    held by another agent; run the turn, passing the parent's abort on to it; a per_task
    session is then deleted with its memory, however the turn ended. Raises ToolAborted when the parent was
    aborted, and ValueError / RuntimeError (the call's error result) for everything else
    that keeps the sub-agent from answering.
    """
    targets = {target.name: target for target in delegation_targets()}
    definition = targets.get(agent)
    if definition is None:
        raise ValueError(
            f"no sub-agent named {agent!r}; available: {', '.join(sorted(targets)) or 'none'}"
        )
    task = task.strip()
    if not task or len(task) > MAX_TASK_CHARS or "\x00" in task:
        raise ValueError(f"a task is 1-{MAX_TASK_CHARS} characters of text")
    parent = await in_pool("store", get_store().get_meta, parent_id)
    if parent is None:
        raise SessionNotFound(parent_id)
    owner_id = parent.owner_id
    session_id = subagent_session_id(
        definition, parent_id=parent_id, owner_id=owner_id, task_id=uuid.uuid4().hex[:16]
    )
    meta = await in_pool(
        "store", _open, session_id, definition, owner_id=owner_id, parent_id=parent_id
    )
    session_id = meta.id
    try:
        if abort.is_set():
            raise ToolAborted(ABORTED_RESULT_TEXT)
        result = await _run_relaying_abort(session_id, task, owner_id=owner_id, abort=abort)
        # Before a per_task session goes: what its turn spent is the caller's (§22).
        await in_pool("store", sub_agent_usage_keep, parent_id, definition.name, result)
    finally:
        if definition.stm == PER_TASK:
            await in_pool("store", _discard, session_id, owner_id=owner_id)
    return _answer(definition, result, parent_aborted=abort.is_set())


def _open(session_id: str, agent: AgentDefinition, *, owner_id: int | None, parent_id: str):
    """The sub-agent's session in the policy's id, else in its fallback id.

    Users cannot create `agent_` ids, but a row made before that rule (another user's, or
    one of another agent) may hold the policy's id: delegation then goes on in the fallback
    id, which carries a keyed hash nobody could have chosen. Such a row is left alone.
    """
    store = get_store()
    for candidate in (session_id, subagent_fallback_session_id(session_id, owner_id=owner_id)):
        existing = store.get_meta(candidate)
        if existing is not None and (existing.owner_id != owner_id or existing.agent != agent.name):
            continue
        try:
            meta = store.create(
                candidate, agent=agent.name, owner_id=owner_id, spawned_by=parent_id
            )
        except AgentMismatch:
            continue  # made by another agent in between
        if meta.owner_id == owner_id:  # else another owner made it in between
            return meta
    raise ValueError(f"the {agent.name} session {session_id!r} is not available")


async def _run_relaying_abort(
    session_id: str, task: str, *, owner_id: int | None, abort: TurnAbort
) -> TurnResult:
    sub_turn = asyncio.ensure_future(
        turn_run_async(
            session_id=session_id,
            text=task,
            owner_id=owner_id,
            # Whoever has the sub-agent's session open watches its turn happen.
            on_event=broadcasts.turn_event_broadcaster(session_id),
        )
    )
    parent_aborted = asyncio.ensure_future(abort.wait_async(None))
    try:
        await asyncio.wait({sub_turn, parent_aborted}, return_when=asyncio.FIRST_COMPLETED)
        # Until the sub-turn has registered itself there is nothing to stop yet: keep asking
        # until an abort lands or the sub-turn is over.
        while parent_aborted.done() and not sub_turn.done():
            if await turn_abort_async(session_id=session_id):
                break
            await asyncio.wait({sub_turn}, timeout=RELAY_INTERVAL_SEC)
        return await sub_turn
    except SessionBusy as error:
        raise RuntimeError(f"{session_id} is busy with another request; try again") from error
    finally:
        parent_aborted.cancel()


def sub_agent_usage_keep(
    parent_id: str, agent: str, result: TurnResult, *, owner_id: int | None = None
) -> None:
    """Keep the sub-agent turn's usage, per model, in the calling session's usage ledger:
    the sub-agent's session may be deleted (per_task) or serve other callers (per_agent).

    With `owner_id`, only a session of that owner is billed: a caller that names its session
    by id alone (a goal's `report_to`) would otherwise bill whoever made a session of that id
    after its own was deleted."""
    parent = get_store().get_meta(parent_id)
    if parent is None:
        return  # deleted while its sub-agent worked: nothing left to bill
    if owner_id is not None and parent.owner_id != owner_id:
        return
    by_model: dict[str, dict] = {}
    for entry in result.entries:
        if isinstance(entry.usage, dict):
            by_model[entry.model or "unknown"] = usage_add(
                by_model.get(entry.model or "unknown", {}), entry.usage
            )
    for model, usage in by_model.items():
        if not any(usage.values()):
            continue  # an answer cut off before the provider counted anything
        usage_ledger_add(
            session_id=parent_id,
            source=SUB_AGENT,
            agent=agent,
            model=model,
            usage=usage,
            # The parent's last entry now is the call that delegated: its results come later.
            seq=parent.last_seq,
        )


def _discard(session_id: str, *, owner_id: int | None) -> None:
    """Delete a per_task session with its memory; one that cannot go now is left to cleanup."""
    try:
        deletion.session_delete(session_id=session_id, owner_id=owner_id)
    except Exception:  # noqa: BLE001 - the call's own outcome matters more; cleanup finishes
        logger.exception("per_task session %s was not deleted", session_id)


def _answer(agent: AgentDefinition, result: TurnResult, *, parent_aborted: bool) -> str:
    if result.status == "aborted" and parent_aborted:
        raise ToolAborted(ABORTED_RESULT_TEXT)
    if result.status != "completed":
        detail = f": {result.error}" if result.error else ""
        raise RuntimeError(f"{agent.name}'s turn ended {result.status}{detail}")
    for entry in reversed(result.entries):
        if entry.kind == "message" and entry.role == "assistant" and not entry.tool_calls:
            if entry.content.strip():
                return entry.content
    raise RuntimeError(f"{agent.name} finished without an answer")


async def _delegate(context: ToolContext, arguments: dict) -> str:
    return await delegation_run(
        parent_id=context.session_id,
        agent=str(arguments.get("agent", "")),
        task=str(arguments.get("task", "")),
        abort=context.abort,
    )


DELEGATE_TOOL = Tool(
    DELEGATE,
    "Hand a self-contained task to a sub-agent; its final answer is the result.",
    {
        "type": "object",
        "properties": {
            "agent": {"type": "string", "description": "the sub-agent to ask"},
            "task": {"type": "string", "description": "what it should do"},
        },
        "required": ["agent", "task"],
    },
    # A coroutine: the sub-agent's turn waits for its model like any turn, and the call holds
    # no thread meanwhile.
    arun=_delegate,
)
