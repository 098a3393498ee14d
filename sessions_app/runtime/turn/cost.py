"""`GET …/cost/`: a session's own tokens and USD per model, in the older shape.

The numbers are those of `GET …/usage/` (runtime.turn.usage, docs/design.md §22): the session's
own calls — turns, summaries, consolidation — never a branch's copied entries. A model
without a price shows its tokens with `usd: None`, and then the total's `usd` is None as well
(a partial sum would read as the whole bill); `unpriced_models` names those models and
`total.usd_known` is the sum over the priced ones. Sub-agents' turns are in `…/usage/`.
"""

from __future__ import annotations

from sessions_app.runtime.turn.usage import session_usage_of
from sessions_app.store import SessionNotFound, get_store


def session_cost(*, session_id: str) -> dict:
    meta = get_store().get_meta(session_id)
    if meta is None:
        raise SessionNotFound(session_id)
    usage = session_usage_of(meta)
    models = [
        {
            "model": model,
            "input_tokens": row["input_tokens"],
            "output_tokens": row["output_tokens"],
            "usd": row["cost_usd"],
        }
        for model, row in usage["by_model"].items()
    ]
    unpriced = [row["model"] for row in models if row["usd"] is None]
    known = round(sum(row["usd"] for row in models if row["usd"] is not None), 6)
    return {
        "models": models,
        "total": {
            "input_tokens": usage["input_tokens"],
            "output_tokens": usage["output_tokens"],
            "usd": usage["cost_usd"],
            "usd_known": known,
        },
        "unpriced_models": unpriced,
    }
