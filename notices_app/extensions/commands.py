"""notices_app's slash commands (docs/design.md §25), registered with sessions_app's command
registry in NoticesAppConfig.ready: `/goal <text>` sets a goal in this conversation, `/goals`
lists the person's goals, `/goals pause|resume|cancel <id>` changes one."""

from __future__ import annotations

from jarvis_site.shared.errors import Code
from notices_app.models import Goal
from notices_app.services.goals import (
    GoalNotFound,
    goal_create,
    goal_describe,
    goal_list,
    goal_set_status,
    goal_to_api,
)
from sessions_app.core.command_registry import CommandRefused, CommandReply

STATUS_OF = {"pause": Goal.PAUSED, "resume": Goal.ACTIVE, "cancel": Goal.CANCELLED}
GOALS_USAGE = "/goals, or /goals pause|resume|cancel <id>"


def _owner(owner_id: int | None) -> int:
    if owner_id is None:
        raise CommandRefused(
            Code.BAD_REQUEST, "goals belong to a person: this conversation has no owner"
        )
    return owner_id


def goal_command(*, session_id: str, owner_id: int | None, text: str) -> CommandReply:
    """Set a goal in this conversation: it reports here (a test session: to the person's
    notices conversation)."""
    if not text:
        raise CommandRefused(Code.BAD_REQUEST, "/goal needs a text: /goal <what to work on>")
    goal = goal_create(owner_id=_owner(owner_id), text=text, set_in=session_id)
    where = "here" if goal.report_to else "to your notices conversation"
    return CommandReply(
        f"Goal set: {goal_describe(goal)}. Its notes and result will be reported {where}.",
        {"goal": goal_to_api(goal)},
    )


def goals_command(*, session_id: str, owner_id: int | None, text: str) -> CommandReply:  # noqa: ARG001 - every registered command gets it
    """List the person's goals, or pause, resume or cancel one of them."""
    owner_id = _owner(owner_id)
    words = text.split()
    if not words:
        goals = goal_list(owner_id=owner_id)
        lines = [
            f"#{goal['id']} {goal['status']}: {goal['text'][:60]}"
            + (f" → {goal['result']}" if goal["result"] else "")
            for goal in goals
        ]
        return CommandReply(
            "\n".join(lines) or "No goals. /goal <text> sets one.", {"goals": goals}
        )
    if len(words) != 2 or words[0] not in STATUS_OF or not words[1].lstrip("#").isdigit():
        raise CommandRefused(Code.BAD_REQUEST, f"usage: {GOALS_USAGE}")
    goal_id = int(words[1].lstrip("#"))
    try:
        goal = goal_set_status(goal_id=goal_id, owner_id=owner_id, status=STATUS_OF[words[0]])
    except GoalNotFound as missing:
        raise CommandRefused(Code.NOT_FOUND, f"you have no goal #{goal_id}") from missing
    return CommandReply(goal_describe(goal), {"goal": goal_to_api(goal)})
