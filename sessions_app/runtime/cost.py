"""What a session's model calls cost: tokens per model and an estimate in USD.

Sums the `usage` of every assistant entry ever stored in the session — compaction adds a
summary but removes nothing, so the cost never goes down. Prices come from
settings.MODEL_PRICES_PER_MTOK (USD per million input / output tokens). A model without a
price shows its tokens with `usd: None`, and then the total's `usd` is None as well (a
partial sum would read as the whole bill); `unpriced_models` names those models and
`total.usd_known` is the sum over the priced ones.
"""

from __future__ import annotations

from django.conf import settings

from sessions_app.store import SessionNotFound, get_store


def model_price(model: str) -> tuple[float, float] | None:
    """(input, output) USD per million tokens; dated variants use their family's price."""
    prices = settings.MODEL_PRICES_PER_MTOK
    name = model.split(":", 1)[1] if model.startswith(("openai:", "anthropic:")) else model
    if name in prices:
        return tuple(prices[name])
    family = max((key for key in prices if name.startswith(key + "-")), key=len, default=None)
    return tuple(prices[family]) if family else None


def session_cost(*, session_id: str) -> dict:
    store = get_store()
    if store.get_meta(session_id) is None:
        raise SessionNotFound(session_id)
    totals: dict[str, list[int]] = {}
    for entry in store.get_messages(session_id):
        if entry.kind != "message" or entry.role != "assistant":
            continue
        usage = entry.usage or {}
        counts = totals.setdefault(entry.model or "unknown", [0, 0])
        counts[0] += int(usage.get("input_tokens") or 0)
        counts[1] += int(usage.get("output_tokens") or 0)
    models = []
    unpriced = []
    for model, (input_tokens, output_tokens) in sorted(totals.items()):
        price = model_price(model)
        usd = None
        if price is None:
            unpriced.append(model)
        else:
            usd = round((input_tokens * price[0] + output_tokens * price[1]) / 1_000_000, 6)
        models.append(
            {
                "model": model,
                "input_tokens": input_tokens,
                "output_tokens": output_tokens,
                "usd": usd,
            }
        )
    known = round(sum(row["usd"] for row in models if row["usd"] is not None), 6)
    return {
        "models": models,
        "total": {
            "input_tokens": sum(row["input_tokens"] for row in models),
            "output_tokens": sum(row["output_tokens"] for row in models),
            "usd": None if unpriced else known,
            "usd_known": known,
        },
        "unpriced_models": unpriced,
    }
