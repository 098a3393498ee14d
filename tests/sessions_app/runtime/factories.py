"""Build in-memory histories (EntryRecords) for the pure history functions."""

from datetime import UTC, datetime

from sessions_app.store import EntryRecord, NewEntry

STAMP = datetime(2025, 1, 1, tzinfo=UTC)


def records(entries: list[NewEntry], session_id: str = "s1", start: int = 1) -> list[EntryRecord]:
    """Number entries the way a store would (seq 1, 2, 3, ...)."""
    return [
        EntryRecord(
            session_id=session_id,
            seq=start + offset,
            created_at=STAMP,
            **{field: getattr(entry, field) for field in NewEntry.__dataclass_fields__},
        )
        for offset, entry in enumerate(entries)
    ]


def user(text, turn="t1"):
    return NewEntry(role="user", content=text, turn_id=turn)


def assistant(text="", calls=(), turn="t1", model="offline", usage=None):
    return NewEntry(
        role="assistant",
        content=text,
        tool_calls=[dict(c) for c in calls] or None,
        turn_id=turn,
        model=model,
        usage=usage,
    )


def call(call_id, name="calculator", arguments='{"expression": "2+2"}'):
    return {"id": call_id, "name": name, "arguments": arguments}


def result(call_id, text="4", name="calculator", turn="t1", is_error=False):
    return NewEntry(
        role="tool", tool_call_id=call_id, name=name, content=text, turn_id=turn, is_error=is_error
    )


def turn_start(turn="t1"):
    return NewEntry(kind="turn_start", turn_id=turn, data={"model": "offline"})


def turn_end(turn="t1", status="completed"):
    return NewEntry(kind="turn_end", turn_id=turn, data={"status": status, "error": ""})


def crash_mid_step(session_id):
    """What a process killed between storing a step's calls and their results leaves."""
    from sessions_app.store import get_store

    get_store().append(
        session_id,
        [
            NewEntry(kind="turn_start", turn_id="t-dead", data={"model": "offline"}),
            NewEntry(role="user", content="wait 5 s and what is 2+2", turn_id="t-dead"),
            NewEntry(
                role="assistant",
                turn_id="t-dead",
                tool_calls=[
                    {"id": "c1", "name": "wait", "arguments": '{"seconds": 5}'},
                    {"id": "c2", "name": "calculator", "arguments": '{"expression": "2+2"}'},
                ],
            ),
        ],
    )
