"""Play turns into a session the way the runtime stores them, and announce them.

The runtime appends each turn's entries and, in the transaction that stores the turn_end,
sends `turn_finished`; these helpers do the same so memory can be tested without a model.
"""

import itertools
import json

from django.db import transaction

from sessions_app import signals
from sessions_app.store import NewEntry, get_store

_turn_numbers = itertools.count(1)


def play_turn(
    session_id: str,
    request: str,
    answer: str,
    *,
    tools=(),
    thought: str = "",
    status: str = "completed",
    owner_id: int | None = None,
    turn_id: str | None = None,
):
    """Store one turn (user request, optional tool step, final answer) and send turn_finished.

    `tools` is a list of (name, arguments dict, result text). Returns the turn's records.
    """
    store = get_store()
    if store.get_meta(session_id) is None:
        store.create(session_id, owner_id=owner_id)
    turn_id = turn_id or f"t{next(_turn_numbers)}"
    entries = [
        NewEntry(kind="turn_start", turn_id=turn_id, data={"model": "offline"}),
        NewEntry(role="user", content=request, turn_id=turn_id),
    ]
    if tools:
        calls = [
            {"id": f"{turn_id}-call{i}", "name": name, "arguments": json.dumps(arguments)}
            for i, (name, arguments, _) in enumerate(tools)
        ]
        entries.append(
            NewEntry(role="assistant", content=thought, tool_calls=calls, turn_id=turn_id)
        )
        entries.extend(
            NewEntry(
                role="tool",
                tool_call_id=call["id"],
                name=call["name"],
                content=result,
                turn_id=turn_id,
            )
            for call, (_, _, result) in zip(calls, tools, strict=True)
        )
    if answer:
        entries.append(NewEntry(role="assistant", content=answer, turn_id=turn_id))
    entries.append(NewEntry(kind="turn_end", turn_id=turn_id, data={"status": status, "error": ""}))
    with transaction.atomic():
        records = store.append(session_id, entries)
        signals.turn_finished.send(
            sender=None,
            session_id=session_id,
            owner_id=owner_id,
            turn_id=turn_id,
            status=status,
            entries=records,
        )
    return records


def arithmetic_turn(session_id, expression="2+2", value="4", **kwargs):
    return play_turn(
        session_id,
        f"What is {expression}?",
        f"{expression} = {value}",
        tools=[("calculator", {"expression": expression}, value)],
        **kwargs,
    )
