"""What a session's model calls used and cost (docs/design.md §22).

Every model call's usage is kept where the call left its mark: a turn's answer on its
assistant entry, a summary on its `compaction` or `branch_summary` entry, a sub-agent's turn
and consolidation in the usage ledger (store.usage_ledger). `session_usage` adds them up:

- the session's own calls at the top (and per model under `by_model`);
- `inherited`: what a branch's copied entries (seq ≤ `branched_at_seq`) carry, and the
  ledger rows copied with them (its parent's sub-agents and consolidation) — tokens its
  parent spent, shown, never counted as the branch's own;
- `sub_agents`: per sub-agent, the turns delegated from this session.

Counts are `input_tokens` (all of them, cached ones included), `output_tokens` (reasoning
included), `cached_tokens` and `reasoning_tokens`. Prices are USD per million tokens from
MODEL_PRICES over the built-in table below; a model without a price makes `cost_usd` null
for every sum it is part of — a partial sum would read as the whole bill.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from django.conf import settings

from sessions_app.store import SessionMeta, get_store
from sessions_app.store.usage_ledger import COUNTS, SUB_AGENT, usage_ledger_of

# USD per million tokens: input, output, and cached input (read from the provider's cache).
BUILTIN_PRICES: dict[str, dict[str, float]] = {
    "offline": {"input": 0.0, "output": 0.0, "cached": 0.0},
    "gpt-4o": {"input": 2.5, "output": 10.0, "cached": 1.25},
    "gpt-4o-mini": {"input": 0.15, "output": 0.6, "cached": 0.075},
    "gpt-4.1": {"input": 2.0, "output": 8.0, "cached": 0.5},
    "gpt-4.1-mini": {"input": 0.4, "output": 1.6, "cached": 0.1},
    "claude-sonnet-4-5": {"input": 3.0, "output": 15.0, "cached": 0.3},
    "claude-opus-4-1": {"input": 15.0, "output": 75.0, "cached": 1.5},
    "claude-haiku-4-5": {"input": 1.0, "output": 5.0, "cached": 0.1},
}


def model_price(model: str) -> dict[str, float] | None:
    """The model's prices; a dated variant (`gpt-4o-2024-08-06`) has its family's. None
    when neither MODEL_PRICES nor the built-in table knows it."""
    prices = {**BUILTIN_PRICES, **settings.MODEL_PRICES}
    name = model.split(":", 1)[1] if model.startswith(("openai:", "anthropic:")) else model
    if name in prices:
        return prices[name]
    family = max((key for key in prices if name.startswith(key + "-")), key=len, default=None)
    return prices[family] if family else None


def usage_counts(usage: dict | None) -> dict[str, int]:
    """The four counts of a stored `usage` (older entries have only input and output)."""
    usage = usage if isinstance(usage, dict) else {}
    counts = {}
    for count in COUNTS:
        value = usage.get(count)
        counts[count] = value if isinstance(value, int) and value > 0 else 0
    return counts


def usage_add(total: dict[str, int], usage: dict | None) -> dict[str, int]:
    """`total` plus one call's usage (a new dict)."""
    counts = usage_counts(usage)
    return {count: total.get(count, 0) + counts[count] for count in COUNTS}


def cost_usd(model: str, counts: dict[str, int]) -> float | None:
    price = model_price(model)
    if price is None:
        return None
    cached = min(counts["cached_tokens"], counts["input_tokens"])
    usd = (
        (counts["input_tokens"] - cached) * price["input"]
        + cached * price.get("cached", price["input"])
        + counts["output_tokens"] * price["output"]
    ) / 1_000_000
    return round(usd, 6)


@dataclass
class _Tally:
    """Counts per model of one part of the answer (own, inherited, one sub-agent)."""

    by_model: dict[str, dict[str, int]]

    @classmethod
    def empty(cls) -> _Tally:
        return cls(by_model={})

    def add(self, model: str, usage: dict | None) -> None:
        model = model or "unknown"
        self.by_model[model] = usage_add(self.by_model.get(model, {}), usage)

    def as_dict(self) -> dict:
        rows = {}
        for model, counts in sorted(self.by_model.items()):
            rows[model] = {**counts, "cost_usd": cost_usd(model, counts)}
        totals = {count: sum(row[count] for row in rows.values()) for count in COUNTS}
        costs = [row["cost_usd"] for row in rows.values()]
        total_cost = None if None in costs else round(sum(costs), 6)
        return {**totals, "cost_usd": total_cost, "by_model": rows}


def _carries_usage(entry) -> bool:
    return isinstance(entry.usage, dict) and any(usage_counts(entry.usage).values())


def session_usage_of(meta: SessionMeta, entries: Iterable | None = None) -> dict:
    """The usage answer for one session (`GET …/usage/`, `/cost`); reads its entries unless
    given them, and its ledger rows."""
    if entries is None:
        entries = get_store().get_messages(meta.id)
    own, inherited = _Tally.empty(), _Tally.empty()
    sub_agents: dict[str, _Tally] = {}
    copied_up_to = meta.branched_at_seq
    for entry in entries:
        if not _carries_usage(entry):
            continue
        # A branch's copies keep their seqs: up to the cut, the parent spent the tokens.
        part = inherited if copied_up_to is not None and entry.seq <= copied_up_to else own
        part.add(entry.model, entry.usage)
    for row in usage_ledger_of(meta.id):
        counts = {count: getattr(row, count) for count in COUNTS}
        if copied_up_to is not None and row.seq <= copied_up_to:
            inherited.add(row.model, counts)  # a copy of the parent's row (a sub-agent's too)
        elif row.source == SUB_AGENT:
            sub_agents.setdefault(row.agent, _Tally.empty()).add(row.model, counts)
        else:
            own.add(row.model, counts)
    return {
        **own.as_dict(),
        "sub_agents": {agent: tally.as_dict() for agent, tally in sorted(sub_agents.items())},
        "inherited": inherited.as_dict(),
    }
