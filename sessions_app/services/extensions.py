"""What the other apps use of sessions_app beyond its services and selectors: the registries
they fill when they start (tools, what memory adds to a system prompt), the types of a tool,
the one-shot model calls memory makes and the usage it records, and the errors a turn they
start may raise.

Other apps reach sessions_app through `services`, `selectors` and the bottom floor `core`
only (the `other-apps-use-sessions-doors` contract in pyproject.toml): this module is the
part of that door that names what lives in the runtime and the store.
"""

from sessions_app.runtime.loop.executors import run_for_sync_caller
from sessions_app.runtime.providers.oneshot import model_ask, model_calls_counted, model_configured
from sessions_app.runtime.tools.base import Tool, ToolAborted, ToolContext, TurnAbort
from sessions_app.runtime.tools.registry import tool_register
from sessions_app.runtime.turn.agents import GOAL_AGENT, agent_get, subagent_session_id
from sessions_app.runtime.turn.lease import SessionBusy
from sessions_app.runtime.turn.memory_context import memory_context_provider_register
from sessions_app.runtime.turn.turns import TooManyTurns, TurnResult, turn_abort, turn_run_async
from sessions_app.store import get_store
from sessions_app.store.usage_ledger import CONSOLIDATION, usage_ledger_add

__all__ = [
    "CONSOLIDATION",
    "GOAL_AGENT",
    "SessionBusy",
    "TooManyTurns",
    "Tool",
    "ToolAborted",
    "ToolContext",
    "TurnAbort",
    "TurnResult",
    "agent_get",
    "memory_context_provider_register",
    "model_ask",
    "model_calls_counted",
    "model_configured",
    "run_for_sync_caller",
    "subagent_session_id",
    "subagent_session_open",
    "tool_register",
    "turn_abort",
    "turn_run_async",
    "usage_ledger_add",
]


def subagent_session_open(
    *, session_id: str, agent: str, owner_id: int | None, title: str, spawned_by: str | None
) -> None:
    """Make the session another app's sub-agent works in (a goal's), hidden like every
    sub-agent session; one that exists already is left as it is."""
    get_store().create(
        session_id, agent=agent, owner_id=owner_id, title=title, spawned_by=spawned_by
    )
