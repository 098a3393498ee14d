"""What memory tells the model about a person (docs/design.md §22): their profile facts and
approved procedures, newest first, within a token budget. The runtime calls it through the
provider memory_app registers (sessions_app.runtime.turn.memory_context) when a turn builds its
system prompt; the text becomes part of the turn's stored request header.
"""

from __future__ import annotations

import json

from django.db import connection

from memory_app.models import MemoryPreference, Procedure, ProfileFact

# The usual rule of thumb for English text: about four characters per token.
CHARS_PER_TOKEN = 4
FACTS_HEADING = "What you know about the user from earlier conversations:"
PROCEDURES_HEADING = "How the user has approved that you handle these kinds of tasks:"


def memory_in_context_of(*, owner_id: int) -> bool:
    """Whether the person lets memory into their conversations' prompts (default: yes)."""
    chosen = MemoryPreference.objects.filter(owner_id=owner_id).values_list("in_context", flat=True)
    return next(iter(chosen), True)


def _procedure_text(title: str, steps) -> str:
    if isinstance(steps, str):
        steps = json.loads(steps)  # a JSON column read through the cursor comes as its text
    said = " ".join(str(step.get("text", "")) for step in steps or () if isinstance(step, dict))
    return f"- {title}: {said}".rstrip(": ")


def _lines_newest_first(owner_id: int, limit: int) -> list[tuple[str, str]]:
    """(heading, line) of the owner's newest `limit` facts and approved procedures, newest
    first; none when the person switched memory out of their prompts.

    One statement: every turn's start asks this, and under a burst the three ORM queries it
    was cost a tenth of a loaded worker's CPU (docs/performance.md)."""
    quote = connection.ops.quote_name
    facts, procedures, preferences = (
        quote(model._meta.db_table) for model in (ProfileFact, Procedure, MemoryPreference)
    )
    sql = f"""
        SELECT kind, body, steps FROM (
            SELECT * FROM (
                SELECT 0 AS kind, updated_at AS said_at, id, text AS body, NULL AS steps
                FROM {facts} WHERE owner_id = %s
                ORDER BY updated_at DESC, id DESC LIMIT %s
            ) AS newest_facts
            UNION ALL
            SELECT * FROM (
                SELECT 1, COALESCE(decided_at, created_at), id, title, CAST(steps AS TEXT)
                FROM {procedures} WHERE owner_id = %s AND status = %s
                ORDER BY decided_at DESC, id DESC LIMIT %s
            ) AS newest_procedures
        ) AS lines
        WHERE NOT EXISTS (SELECT 1 FROM {preferences} WHERE owner_id = %s AND NOT in_context)
        ORDER BY said_at DESC, kind, id DESC
    """  # noqa: S608 - table names quoted, values bound
    with connection.cursor() as cursor:
        cursor.execute(sql, [owner_id, limit, owner_id, Procedure.Status.APPROVED, limit, owner_id])
        rows = cursor.fetchall()
    return [
        (FACTS_HEADING, f"- {body}")
        if kind == 0
        else (PROCEDURES_HEADING, _procedure_text(body, steps))
        for kind, body, steps in rows
    ]


def memory_context_for_owner(*, owner_id: int, budget_tokens: int) -> str:
    """The facts and approved procedures that fit in `budget_tokens`, newest first, under
    their headings; "" when switched off or nothing is known.

    At most one row per token of the budget is read (a line is never shorter than a token),
    so the work stays bounded however much memory holds.
    """
    if budget_tokens <= 0:
        return ""
    lines = _lines_newest_first(owner_id, budget_tokens)
    budget_chars = budget_tokens * CHARS_PER_TOKEN
    chosen: dict[str, list[str]] = {}
    used = 0
    for heading, text in lines:
        cost = len(text) + 1 + (0 if heading in chosen else len(heading) + 2)
        if used + cost > budget_chars:
            continue  # a shorter, older line may still fit
        chosen.setdefault(heading, []).append(text)
        used += cost
    return "\n\n".join(
        "\n".join([heading, *chosen[heading]])
        for heading in (FACTS_HEADING, PROCEDURES_HEADING)
        if heading in chosen
    )
