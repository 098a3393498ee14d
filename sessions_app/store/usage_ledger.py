"""Model usage a session owes that none of its entries carries (docs/design.md §22): a
delegated sub-agent's turn, consolidation's questions. Rows of the database under both
backends, like approval requests; a session's delete removes them (the store's `delete`),
a branch gets a copy of those up to its cut (the branch service).
"""

from __future__ import annotations

from sessions_app.models import ModelUsage
from sessions_app.store.rows import delete_rows_of_session

SUB_AGENT = ModelUsage.SUB_AGENT
CONSOLIDATION = ModelUsage.CONSOLIDATION
TITLE = ModelUsage.TITLE
COUNTS = ("input_tokens", "output_tokens", "cached_tokens", "reasoning_tokens")


def usage_ledger_add(
    *, session_id: str, source: str, model: str, usage: dict, seq: int, agent: str = ""
) -> None:
    """Keep one call's (or one sub-agent turn's, per model) usage for the session; `seq` is
    the session's last seq at the time."""
    ModelUsage.objects.create(
        session_id=session_id,
        source=source,
        agent=agent,
        model=model,
        seq=max(0, int(seq)),
        **{count: max(0, int(usage.get(count) or 0)) for count in COUNTS},
    )


def usage_ledger_copy(*, source_id: str, new_id: str, up_to_seq: int) -> None:
    """Give a branch cut at `up_to_seq` the rows of its source up to the cut, seqs kept, so
    they count as inherited there (runtime.turn.usage)."""
    ModelUsage.objects.bulk_create(
        ModelUsage(
            session_id=new_id,
            source=row.source,
            agent=row.agent,
            model=row.model,
            seq=row.seq,
            **{count: getattr(row, count) for count in COUNTS},
        )
        for row in ModelUsage.objects.filter(session_id=source_id, seq__lte=up_to_seq)
    )


def usage_ledger_of(session_id: str) -> list[ModelUsage]:
    return list(ModelUsage.objects.filter(session_id=session_id).order_by("id"))


def remove_for_session(session_id: str) -> None:
    """Remove a deleted session's rows (store backends' `delete`)."""
    delete_rows_of_session(ModelUsage, session_id)
