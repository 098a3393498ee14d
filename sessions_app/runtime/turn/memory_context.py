"""What the owner's memory adds to a turn's system prompt (docs/design.md §22).

sessions_app never imports memory_app: memory_app registers its provider here in its
AppConfig.ready, as tools register themselves. A provider is called with the owner's id and
a token budget (MEMORY_CONTEXT_TOKENS) and answers with text within that budget, or "" (the
person switched it off, or memory knows nothing). The prompt built here is what the turn
sends and what its stored request header keeps, so the request replay (§20) stays exact.
"""

from __future__ import annotations

from collections.abc import Callable

from django.conf import settings

from sessions_app.core.ids import is_test_session
from sessions_app.store import SessionMeta

MemoryContextProvider = Callable[..., str]

_providers: list[MemoryContextProvider] = []


def memory_context_provider_register(provider: MemoryContextProvider) -> None:
    """Add a provider (`provider(owner_id=…, budget_tokens=…) -> str`); once only."""
    if provider not in _providers:
        _providers.append(provider)


def _teaches_nothing(meta: SessionMeta) -> bool:
    """A test session, or a sub-agent's session working for one, gets no memory: tests must
    not depend on what a person's real conversations taught."""
    return is_test_session(meta.id) or bool(meta.spawned_by and is_test_session(meta.spawned_by))


def system_prompt_for(*, agent_prompt: str, meta: SessionMeta) -> str:
    """The agent's prompt, then what memory knows about the session's owner (if anything)."""
    budget = settings.MEMORY_CONTEXT_TOKENS
    if meta.owner_id is None or budget <= 0 or _teaches_nothing(meta):
        return agent_prompt
    parts = [provider(owner_id=meta.owner_id, budget_tokens=budget) for provider in _providers]
    memory = "\n\n".join(part for part in parts if part)
    return f"{agent_prompt}\n\n{memory}" if memory else agent_prompt
