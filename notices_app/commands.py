"""notices_app's slash command `/goal <text>` (docs/design.md §25), registered with
sessions_app's command registry in NoticesAppConfig.ready."""

from __future__ import annotations

from notices_app.goals import GoalInvalid, TooManyGoals, goal_create, goal_describe, goal_to_api
from sessions_app.command_registry import CommandRefused, CommandReply


def goal_command(*, session_id: str, owner_id: int, text: str) -> CommandReply:
    """Set a goal in this conversation: it reports here (a test session: to the person's
    notices conversation)."""
    if not text:
        raise CommandRefused("bad_request", "/goal needs a text: /goal <what to work on>")
    try:
        goal = goal_create(owner_id=owner_id, text=text, set_in=session_id)
    except (GoalInvalid, TooManyGoals) as refused:
        raise CommandRefused(refused.code, str(refused)) from refused
    where = "here" if goal.report_to else "to your notices conversation"
    return CommandReply(
        f"Goal set: {goal_describe(goal)}. Its notes and result will be reported {where}.",
        {"goal": goal_to_api(goal)},
    )
