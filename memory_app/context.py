"""What memory tells the model about a person (docs/design.md §22): their profile facts and
approved procedures, newest first, within a token budget. The runtime calls it through the
provider memory_app registers (sessions_app.runtime.memory_context) when a turn builds its
system prompt; the text becomes part of the turn's stored request header.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from memory_app.models import MemoryPreference, Procedure, ProfileFact

# The usual rule of thumb for English text: about four characters per token.
CHARS_PER_TOKEN = 4
FACTS_HEADING = "What you know about the user from earlier conversations:"
PROCEDURES_HEADING = "How the user has approved that you handle these kinds of tasks:"


@dataclass(frozen=True)
class _Line:
    when: datetime
    heading: str
    text: str


def memory_in_context_of(*, owner_id: int) -> bool:
    """Whether the person lets memory into their conversations' prompts (default: yes)."""
    chosen = MemoryPreference.objects.filter(owner_id=owner_id).values_list("in_context", flat=True)
    return next(iter(chosen), True)


def _procedure_text(procedure: Procedure) -> str:
    steps = " ".join(
        str(step.get("text", "")) for step in procedure.steps or () if isinstance(step, dict)
    )
    return f"- {procedure.title}: {steps}".rstrip(": ")


def memory_context_for_owner(*, owner_id: int, budget_tokens: int) -> str:
    """The facts and approved procedures that fit in `budget_tokens`, newest first, under
    their headings; "" when switched off or nothing is known.

    At most one row per token of the budget is read (a line is never shorter than a token),
    so the work stays bounded however much memory holds.
    """
    if budget_tokens <= 0 or not memory_in_context_of(owner_id=owner_id):
        return ""
    facts = ProfileFact.objects.filter(owner_id=owner_id).order_by("-updated_at", "-id")
    procedures = Procedure.objects.filter(
        owner_id=owner_id, status=Procedure.Status.APPROVED
    ).order_by("-decided_at", "-id")
    lines = [
        _Line(fact.updated_at, FACTS_HEADING, f"- {fact.text}") for fact in facts[:budget_tokens]
    ]
    lines += [
        _Line(p.decided_at or p.created_at, PROCEDURES_HEADING, _procedure_text(p))
        for p in procedures[:budget_tokens]
    ]
    lines.sort(key=lambda line: line.when, reverse=True)
    budget_chars = budget_tokens * CHARS_PER_TOKEN
    chosen: dict[str, list[str]] = {}
    used = 0
    for line in lines:
        cost = len(line.text) + 1 + (0 if line.heading in chosen else len(line.heading) + 2)
        if used + cost > budget_chars:
            continue  # a shorter, older line may still fit
        chosen.setdefault(line.heading, []).append(line.text)
        used += cost
    return "\n\n".join(
        "\n".join([heading, *chosen[heading]])
        for heading in (FACTS_HEADING, PROCEDURES_HEADING)
        if heading in chosen
    )
