"""The agent's schedule tools, `schedule` and `unschedule` (docs/design.md §14), and a goal's,
`goal_update` and `goal_done` (§25).

Registered with the runtime's tool registry in NoticesAppConfig.ready; each runs one service
of this app for the conversation that calls it.
"""

from __future__ import annotations

from notices_app.services.goals import goal_finish, goal_note_add
from notices_app.services.schedules import (
    ScheduleNotFound,
    schedule_cancel,
    schedule_create,
    schedule_describe,
    schedules_cancel_matching,
)
from sessions_app import selectors
from sessions_app.services.extensions import Tool, ToolContext


def _schedule_owner(context: ToolContext) -> int:
    meta = selectors.session_find(session_id=context.session_id)
    if meta is None or meta.owner_id is None:
        raise ValueError("schedules belong to a user, and this conversation has none")
    return meta.owner_id


def _number(value, name: str, cast):
    # Models now and then send "10" or 2.0 where the schema says a number or an integer.
    if value is None:
        return None
    try:
        number = float(value)
    except (TypeError, ValueError) as error:
        raise ValueError(f"{name} is a number, not {value!r}") from error
    if cast is int and not number.is_integer():
        raise ValueError(f"{name} is a whole number, not {value!r}")
    return cast(number)


def _schedule(context: ToolContext, arguments: dict) -> str:
    owner_id = _schedule_owner(context)
    in_seconds = _number(arguments.get("in_seconds"), "in_seconds", float)
    every = _number(arguments.get("every"), "every", int)
    # Fenced like every write of a turn: no schedule comes from a turn whose session was
    # deleted (or re-created) while it ran.
    with context.fenced():
        schedule = schedule_create(
            owner_id=owner_id,
            session_id=context.session_id,
            text=str(arguments.get("text", "")),
            kind=str(arguments.get("kind") or "reminder"),
            in_seconds=in_seconds,
            every=every,
            unit=str(arguments.get("unit") or ""),
        )
    return f"scheduled {schedule_describe(schedule)}"


def _unschedule(context: ToolContext, arguments: dict) -> str:
    owner_id = _schedule_owner(context)
    if arguments.get("id") is not None:
        try:
            cancelled = [schedule_cancel(schedule_id=int(arguments["id"]), owner_id=owner_id)]
        except (ValueError, ScheduleNotFound) as error:
            raise ValueError(f"there is no schedule #{arguments['id']}") from error
    elif arguments.get("all") or str(arguments.get("text") or "").strip():
        text = "" if arguments.get("all") else str(arguments["text"]).strip()
        cancelled = schedules_cancel_matching(owner_id=owner_id, text=text)
    else:
        raise ValueError("unschedule needs an id, a text to match, or all=true")
    if not cancelled:
        return "no active schedule matched"
    return "cancelled " + "; ".join(schedule_describe(schedule) for schedule in cancelled)


SCHEDULE_TOOLS = (
    Tool(
        "schedule",
        "Schedule a reminder (kind 'reminder': the text is shown to the user at that time) or "
        "a prompt (kind 'prompt': the text is run as a request then, and its answer shown). "
        "The first run is in_seconds from now; with every+unit it repeats every N minutes, "
        "hours or days (without in_seconds the first run is one interval from now).",
        {
            "type": "object",
            "properties": {
                "text": {"type": "string"},
                "kind": {"type": "string", "enum": ["reminder", "prompt"]},
                "in_seconds": {"type": "number", "minimum": 0},
                "every": {"type": "integer", "minimum": 1},
                "unit": {"type": "string", "enum": ["minutes", "hours", "days"]},
            },
            "required": ["text"],
        },
        _schedule,
    ),
    Tool(
        "unschedule",
        "Cancel the user's schedules: one by id, those whose text contains `text`, or all.",
        {
            "type": "object",
            "properties": {
                "id": {"type": "integer"},
                "text": {"type": "string"},
                "all": {"type": "boolean"},
            },
        },
        _unschedule,
    ),
)


def _goal_update(context: ToolContext, arguments: dict) -> str:
    # Fenced like every write of a turn: a deleted goal session reports nothing more.
    with context.fenced():
        note = goal_note_add(session_id=context.session_id, note=str(arguments.get("note", "")))
    return f"note {note.number} reported to the user"


def _goal_done(context: ToolContext, arguments: dict) -> str:
    with context.fenced():
        goal_finish(session_id=context.session_id, result=str(arguments.get("result", "")))
    return "the goal is done and its result reported to the user"


GOAL_TOOLS = (
    Tool(
        "goal_update",
        "Report progress on the goal: a short note the user receives now.",
        {
            "type": "object",
            "properties": {"note": {"type": "string"}},
            "required": ["note"],
        },
        _goal_update,
    ),
    Tool(
        "goal_done",
        "Finish the goal with its result, which the user receives; no check-in follows.",
        {
            "type": "object",
            "properties": {"result": {"type": "string"}},
            "required": ["result"],
        },
        _goal_done,
    ),
)
