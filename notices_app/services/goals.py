"""Goals: something a person asks Jarvis to work on over hours and report back (§25).

A goal works in a sub-agent session of its own (agent `goal`, id `agent_goal__task_<id>`,
owned by the person, hidden in the list like other sub-agent sessions), one turn per
check-in. Each check-in is a task of the task worker (`check_in_goal`, carrying the check-in's
number), so a goal survives restarts like a schedule:

- a check-in is claimed once: under the goal's row lock it runs only while the goal waits for
  exactly its number (`check_ins` = number - 1, no check-in running), and the claim commits
  before the turn starts. A duplicate task, a second worker or a recovery finds the number
  taken and does nothing, so no check-in's turn ever runs twice;
- a worker killed during a check-in leaves the claim with a dead task: `goals_recover`
  counts that check-in as used (its turn is in the session, closed as interrupted on the
  next use) and queues the next one at once;
- the turn's tools `goal_update {note}` and `goal_done {result}` write under the same row
  lock and add each note and the result as a notice (message ids `goal:<id>:note:<n>`,
  `goal:<id>:result`, `goal:<id>:end`: once each) to the report conversation.

A goal set in a test session reports to the person's notices conversation, never into a test
session, and nothing of it leaves the process. Check-in turns count against the person's turn
limits (TURN_THROTTLE_RATE, MAX_TURNS_PER_USER: a check-in over them waits and tries again)
and their usage rolls up into the report conversation's usage under `sub_agents`.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction
from django.db.models import Case, IntegerField, Q, Value, When
from django.utils import timezone

from jarvis_site.shared.errors import Code, DomainError
from jarvis_site.shared.markdown import markdown_literal
from notices_app.core.task_queue import (
    CHECK_IN_GOAL,
    RUNNING_STALE_SEC,
    task_cancel_pending,
    task_enqueue,
    task_is_waiting,
)
from notices_app.delivery import notices_conversation, notices_kept_inside
from notices_app.models import Goal, GoalNote
from sessions_app import selectors
from sessions_app.core.ids import is_test_session, validate_session_id
from sessions_app.core.throttles import turn_throttle_wait
from sessions_app.services import broadcasts, deletion
from sessions_app.services.delegation import sub_agent_usage_keep
from sessions_app.services.extensions import (
    GOAL_AGENT,
    SessionBusy,
    TooManyTurns,
    TurnResult,
    agent_get,
    run_for_sync_caller,
    subagent_session_id,
    subagent_session_open,
    turn_abort,
    turn_run_async,
)
from sessions_app.services.notices import proactive_add

logger = logging.getLogger(__name__)

MAX_TEXT_CHARS = 20_000
MAX_NOTE_CHARS = 10_000
MAX_CHECK_EVERY_SEC = 30 * 86400
MAX_TURNS_LIMIT = 100
DEFAULT_CHECK_EVERY_SEC = 3600
DEFAULT_MAX_TURNS = 10
# A check-in whose owner already runs MAX_TURNS_PER_USER turns tries again this much later.
BUSY_RETRY_SEC = 30
# How much of the goal's text a notice repeats to say which goal it is about.
TITLE_CHARS = 60
GOAL_PAGE_MAX = 200
# The statuses a person may ask for (PATCH): the others are reached by the goal's work.
SETTABLE = (Goal.ACTIVE, Goal.PAUSED, Goal.CANCELLED)
FINISHED = (Goal.DONE, Goal.EXHAUSTED, Goal.FAILED, Goal.CANCELLED)


class GoalInvalid(DomainError, ValueError):
    """Bad input for a goal (the API answers 400 invalid)."""

    code = Code.INVALID


class GoalNotFound(DomainError, LookupError):
    """No such goal of this user (404, for another user's too)."""

    code = Code.NOT_FOUND


class TooManyGoals(DomainError):
    """The user already has MAX_ACTIVE_GOALS_PER_USER open goals (429 too_many_goals)."""

    code = Code.TOO_MANY_GOALS

    def __init__(self, limit: int):
        super().__init__(
            f"you already have {limit} active or paused goals, the most allowed; cancel one first"
        )


# --- create, change ---------------------------------------------------------------------------


def _whole_number(value: Any, name: str, default: int, low: int, high: int) -> int:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise GoalInvalid(f"{name} is a whole number from {low} to {high}")
    return value


def _validated_text(text: Any, *, limit: int, what: str) -> str:
    if not isinstance(text, str) or not text.strip():
        raise GoalInvalid(f"a {what} needs a text")
    text = text.strip()
    if len(text) > limit:
        raise GoalInvalid(f"the {what} is at most {limit} characters")
    if "\x00" in text:
        raise GoalInvalid(f"the {what} may not contain NUL characters")
    return text


def goal_session_id(goal_id: int) -> str:
    return subagent_session_id(
        agent_get(GOAL_AGENT), parent_id="", owner_id=None, task_id=str(goal_id)
    )


def goal_create(
    *,
    owner_id: int,
    text: str,
    set_in: str = "",
    report_to: str | None = None,
    check_every_sec: int | None = None,
    max_turns: int | None = None,
) -> Goal:
    """Create a goal, its session, and queue its first check-in at once.

    `set_in` is the conversation it was set in (the `/goal` command's), which is where it
    reports unless `report_to` names another of the caller's conversations. A test session
    is never the report conversation: a goal set in (or for) one reports to the person's
    notices conversation and sends nothing outbound. Raises GoalInvalid, InvalidSessionId,
    SessionNotFound (a conversation that is not the caller's), TooManyGoals.
    """
    text = _validated_text(text, limit=MAX_TEXT_CHARS, what="goal")
    check_every_sec = _whole_number(
        check_every_sec,
        "check_every_sec",
        DEFAULT_CHECK_EVERY_SEC,
        settings.GOAL_MIN_CHECK_SEC,
        MAX_CHECK_EVERY_SEC,
    )
    max_turns = _whole_number(max_turns, "max_turns", DEFAULT_MAX_TURNS, 1, MAX_TURNS_LIMIT)
    target = report_to or set_in
    if target:
        selectors.session_get(session_id=validate_session_id(target), owner_id=owner_id)
    from_test = bool(target) and is_test_session(target)
    now = timezone.now()
    with transaction.atomic():
        # The owner's row lock makes concurrent creates of one user count one after the
        # other, so that two of them cannot both take the last free place.
        get_user_model().objects.select_for_update().filter(pk=owner_id).exists()
        open_goals = Goal.objects.filter(owner_id=owner_id, status__in=Goal.OPEN).count()
        if open_goals >= settings.MAX_ACTIVE_GOALS_PER_USER:
            raise TooManyGoals(settings.MAX_ACTIVE_GOALS_PER_USER)
        goal = Goal.objects.create(
            owner_id=owner_id,
            text=text,
            report_to="" if from_test else target,
            outbound=not from_test,
            check_every_sec=check_every_sec,
            max_turns=max_turns,
            next_check_at=now,
            created_at=now,
        )
        goal.session_id = goal_session_id(goal.id)
        # The task row commits with the goal: no goal without its first check-in.
        goal.task_id = task_enqueue(CHECK_IN_GOAL, goal.id, 1)
        goal.save(update_fields=["session_id", "task_id"])
    # Made now (not at the first check-in) so that the goal's session is there to open.
    _open_session(goal)
    logger.info("goal %s created for user %s", goal.id, owner_id)
    return goal


def _open_session(goal: Goal) -> str:
    """The goal's session, made again if it is gone (a cleanup of sub-agent sessions)."""
    spawned_by = goal.report_to or goal.session_id
    subagent_session_open(
        session_id=goal.session_id,
        agent=GOAL_AGENT,
        owner_id=goal.owner_id,
        title=f"Goal: {_title(goal)}",
        spawned_by=spawned_by,
    )
    return goal.session_id


def goal_set_status(*, goal_id: int, owner_id: int, status: str) -> Goal:
    """Pause, resume or cancel the caller's goal; asking for the status it has changes
    nothing.

    Pause removes the queued check-in (a running one finishes; none follows); resume queues
    the next one at its time, or at once when that has passed; cancel also stops the
    check-in's turn if one runs. A finished goal stays as it is (GoalInvalid). Raises
    GoalNotFound for a missing goal or another user's.
    """
    if status not in SETTABLE:
        raise GoalInvalid(f"status is one of {', '.join(SETTABLE)}, not {status!r}")
    with transaction.atomic():
        # The row lock a check-in takes to claim and to finish: it sees the new status.
        goal = Goal.objects.select_for_update().filter(id=goal_id, owner_id=owner_id).first()
        if goal is None:
            raise GoalNotFound(goal_id)
        if goal.status == status:
            return goal
        if goal.status in FINISHED:
            raise GoalInvalid(f"the goal is {goal.status}; it cannot become {status}")
        now = timezone.now()
        if status == Goal.ACTIVE:
            at = max(goal.next_check_at or now, now)
            goal.next_check_at = at
            if goal.checking_since is None:
                goal.task_id = _enqueue_check_in(goal, run_after=at)
        else:
            task_cancel_pending(goal.task_id)
            goal.task_id = ""
            if status == Goal.CANCELLED:
                goal.finished_at = now
                goal.next_check_at = None
                if goal.checking_since is not None:
                    # After the commit: the check-in's turn stops, and its end finds the goal
                    # cancelled and queues nothing.
                    transaction.on_commit(lambda: turn_abort(session_id=goal.session_id))
        goal.status = status
        goal.save(update_fields=["status", "next_check_at", "task_id", "finished_at"])
    logger.info("goal %s is now %s", goal_id, status)
    return goal


def goals_purge_for_owner(*, owner_id: int) -> int:
    """Delete every goal of a user whose account is being deleted, with their sessions and
    queued check-ins; returns how many goals went."""
    for goal in Goal.objects.filter(owner_id=owner_id, status__in=Goal.OPEN):
        goal_set_status(goal_id=goal.id, owner_id=owner_id, status=Goal.CANCELLED)
    for session_id in Goal.objects.filter(owner_id=owner_id).values_list("session_id", flat=True):
        if session_id and selectors.session_find(session_id=session_id) is not None:
            deletion.session_delete(session_id=session_id, owner_id=owner_id)
    return Goal.objects.filter(owner_id=owner_id).delete()[0]


# --- check-ins --------------------------------------------------------------------------------


def _enqueue_check_in(goal: Goal, *, run_after=None) -> str:
    return task_enqueue(CHECK_IN_GOAL, goal.id, goal.check_ins + 1, run_after=run_after)


def _waits_for(goal: Goal | None, number: int) -> bool:
    return (
        goal is not None
        and goal.status == Goal.ACTIVE
        and goal.checking_since is None
        and goal.check_ins == number - 1
    )


def check_in_prompt(goal: Goal) -> str:
    """What the goal's session is told at a check-in: the goal, where it stands, its notes."""
    notes = list(goal.notes.values_list("text", flat=True))
    lines = [
        f"Goal: {goal.text}",
        "",
        f"Check-in {goal.check_ins} of at most {goal.max_turns}.",
    ]
    if notes:
        lines += ["Your notes so far:", *(f"- {note}" for note in notes)]
    lines += [
        "",
        "Work on the goal now. Call goal_update with a short progress note, or goal_done "
        "with the result once the goal is reached.",
    ]
    return "\n".join(lines)


def goal_check_in(*, goal_id: int, number: int) -> str:
    """Run check-in `number` of a goal (the body of the `check_in_goal` task).

    Steps:
    1. without a lock, skip a check-in the goal no longer waits for; over the owner's
       TURN_THROTTLE_RATE, queue it again for later;
    2. claim it under the goal's row lock (commits before the turn);
    3. run one turn in the goal's session, no lock held (at MAX_TURNS_PER_USER the claim is
       given back and the check-in queued again for later);
    4. under the row lock: count the turn, then queue the next check-in, or end the goal
       `exhausted` at max_turns; a failed turn is tried again with back-off and after
       GOAL_MAX_ERRORS in a row the goal is `failed`. A goal its turn finished (goal_done),
       or that was paused or cancelled meanwhile, gets no next check-in.
    Returns what happened: "skipped", "deferred", or the goal's status afterwards.
    """
    goal = Goal.objects.select_related("owner").filter(id=goal_id).first()
    if not _waits_for(goal, number):
        return "skipped"
    wait = turn_throttle_wait(goal.owner)
    if wait is not None:
        return _defer(goal_id, number, wait, why="over TURN_THROTTLE_RATE")
    with transaction.atomic():
        goal = Goal.objects.select_for_update().filter(id=goal_id).first()
        if not _waits_for(goal, number):
            return "skipped"
        goal.check_ins = number
        goal.checking_since = timezone.now()
        goal.save(update_fields=["check_ins", "checking_since"])
    try:
        session_id = _open_session(goal)
        result = run_for_sync_caller(
            turn_run_async,
            session_id=session_id,
            text=check_in_prompt(goal),
            owner_id=goal.owner_id,
            # Whoever has the goal's session open watches its check-in happen.
            on_event=broadcasts.turn_event_broadcaster(session_id),
        )
    except TooManyTurns:
        _unclaim(goal_id, number)
        return _defer(goal_id, number, BUSY_RETRY_SEC, why="at MAX_TURNS_PER_USER")
    except SessionBusy as error:
        return _after_check_in(goal_id, number, result=None, error=str(error))
    except Exception as error:  # noqa: BLE001 - a check-in that breaks is retried, then failed
        # Whatever broke (a draining worker, a session deleted meanwhile, a bug), the claim
        # is settled here: otherwise it would wait for a recovery to count it.
        logger.exception("goal %s: check-in %s broke", goal_id, number)
        return _after_check_in(goal_id, number, result=None, error=type(error).__name__)
    return _after_check_in(goal_id, number, result=result, error=result.error)


def _unclaim(goal_id: int, number: int) -> None:
    with transaction.atomic():
        Goal.objects.filter(id=goal_id, check_ins=number).update(
            check_ins=number - 1, checking_since=None
        )


def _defer(goal_id: int, number: int, wait: float, *, why: str) -> str:
    """Queue the same check-in again `wait` seconds from now."""
    with transaction.atomic():
        goal = Goal.objects.select_for_update().filter(id=goal_id).first()
        if not _waits_for(goal, number):
            return "skipped"
        goal.next_check_at = timezone.now() + timedelta(seconds=wait)
        goal.task_id = _enqueue_check_in(goal, run_after=goal.next_check_at)
        goal.save(update_fields=["next_check_at", "task_id"])
    logger.info("goal %s: check-in %s deferred (%s)", goal_id, number, why)
    return "deferred"


def _after_check_in(goal_id: int, number: int, *, result: TurnResult | None, error: str) -> str:
    goal = Goal.objects.filter(id=goal_id).first()
    if goal is None:
        return "skipped"
    if result is not None and goal.report_to:
        # What the check-in spent is the report conversation's, under sub_agents (§22).
        sub_agent_usage_keep(goal.report_to, GOAL_AGENT, result, owner_id=goal.owner_id)
    failed = result is None or result.status in ("error", "interrupted")
    with transaction.atomic():
        goal = Goal.objects.select_for_update().filter(id=goal_id).first()
        if goal is None or goal.check_ins != number or goal.checking_since is None:
            return "skipped"  # a recovery took this check-in for dead meanwhile
        goal.checking_since = None
        now = timezone.now()
        if failed:
            goal.errors += 1
            goal.last_error = (error or "the check-in failed")[:2000]
        else:
            goal.turns_used += 1
            goal.errors = 0
        if goal.status == Goal.ACTIVE:
            _next_or_end(goal, now=now)
        goal.save()
    return goal.status


def _next_or_end(goal: Goal, *, now) -> None:
    """Queue the goal's next check-in, or end it (exhausted, failed) with a notice that says
    so. Called with the goal's row locked."""
    if goal.errors >= settings.GOAL_MAX_ERRORS:
        _end(goal, Goal.FAILED, f"it failed {goal.errors} check-ins in a row: {goal.last_error}")
    elif goal.turns_used >= goal.max_turns:
        _end(goal, Goal.EXHAUSTED, f"it used its {goal.max_turns} check-ins without finishing")
    else:
        delay = goal.check_every_sec
        if goal.errors:
            delay = min(delay, settings.GOAL_RETRY_BASE_SEC * 2 ** (goal.errors - 1))
        goal.next_check_at = now + timedelta(seconds=delay)
        goal.task_id = _enqueue_check_in(goal, run_after=goal.next_check_at)


def _end(goal: Goal, status: str, why: str) -> None:
    goal.status = status
    goal.finished_at = timezone.now()
    goal.next_check_at = None
    goal.task_id = ""
    _report(
        goal, message_id=f"goal:{goal.id}:end", content=f"Goal “{_quoted(goal)}” stopped: {why}"
    )


def goals_recover(*, workers_stopped: bool = False) -> int:
    """Queue again the check-ins a dead worker took with it; returns how many.

    A check-in claimed by a worker that died is counted as a used check-in (its turn is in
    the goal's session) and the next one is queued at once; a due check-in whose task is
    gone is queued again. Both are safe to do twice: a check-in runs only for the number the
    goal waits for. `workers_stopped` says no worker runs now, so every RUNNING task is a
    dead one.
    """
    running_stale_sec = 0 if workers_stopped else RUNNING_STALE_SEC
    now = timezone.now()
    queued = 0
    # Only goals that run a check-in or wait for a due one: the others have their task ahead.
    candidates = Goal.objects.filter(status=Goal.ACTIVE).filter(
        Q(checking_since__isnull=False) | Q(next_check_at__lte=now)
    )
    for goal_id in candidates.values_list("id", flat=True):
        with transaction.atomic():
            goal = Goal.objects.select_for_update().filter(id=goal_id).first()
            if goal.status != Goal.ACTIVE:
                continue
            if goal.checking_since is not None:
                if task_is_waiting(goal.task_id, running_stale_sec=running_stale_sec):
                    continue
                logger.warning("goal %s: check-in %s died with its worker", goal.id, goal.check_ins)
                goal.checking_since = None
                goal.turns_used += 1
                if goal.turns_used >= goal.max_turns:
                    why = f"it used its {goal.max_turns} check-ins without finishing"
                    _end(goal, Goal.EXHAUSTED, why)
                else:
                    # At once: the check-in that died produced nothing to wait for.
                    goal.next_check_at = now
                    goal.task_id = _enqueue_check_in(goal)
            elif goal.next_check_at is not None and goal.next_check_at <= now:
                if task_is_waiting(goal.task_id, running_stale_sec=running_stale_sec):
                    continue
                goal.task_id = _enqueue_check_in(goal)
            else:
                continue
            goal.save()
            queued += 1
    return queued


# --- what the goal's turn reports ---------------------------------------------------------------


def _title(goal: Goal) -> str:
    line = " ".join(goal.text.split())
    return line if len(line) <= TITLE_CHARS else line[: TITLE_CHARS - 1] + "…"


def _quoted(goal: Goal) -> str:
    """The goal's title inside a notice, which is markdown: the person's words as typed (the
    notes and the result around it are the model's own markdown)."""
    return markdown_literal(_title(goal))


def _report(goal: Goal, *, message_id: str, content: str) -> None:
    """Add a notice of the goal to its report conversation (the one it was set in while it is
    there, else the person's notices conversation); outbound only when the goal may send."""
    target = ""
    if goal.report_to:
        meta = selectors.session_find(session_id=goal.report_to)
        if meta is not None and meta.owner_id == goal.owner_id:
            target = meta.id
    target = target or notices_conversation(owner_id=goal.owner_id)
    with notices_kept_inside(not goal.outbound):
        proactive_add(session_id=target, message_id=message_id, content=content)


def _working_goal(session_id: str) -> Goal:
    """The active goal whose session this is, its row locked; ValueError (the tool call's
    error result) otherwise."""
    goal = Goal.objects.select_for_update().filter(session_id=session_id).first()
    if goal is None:
        raise ValueError("this conversation works on no goal")
    if goal.status != Goal.ACTIVE:
        raise ValueError(f"the goal is {goal.status}; nothing more is reported")
    return goal


def goal_note_add(*, session_id: str, note: str) -> GoalNote:
    """Keep a progress note of the goal worked on in `session_id` and report it."""
    note = _validated_text(note, limit=MAX_NOTE_CHARS, what="note")
    with transaction.atomic():
        goal = _working_goal(session_id)
        number = goal.notes.count() + 1
        saved = GoalNote.objects.create(
            goal=goal, number=number, text=note, created_at=timezone.now()
        )
        _report(
            goal,
            message_id=f"goal:{goal.id}:note:{number}",
            content=f"Goal “{_quoted(goal)}”: {note}",
        )
    return saved


def goal_finish(*, session_id: str, result: str) -> Goal:
    """End the goal worked on in `session_id` as done with `result`, and report it."""
    result = _validated_text(result, limit=MAX_NOTE_CHARS, what="result")
    with transaction.atomic():
        goal = _working_goal(session_id)
        goal.status = Goal.DONE
        goal.result = result
        goal.finished_at = timezone.now()
        goal.next_check_at = None
        goal.save(update_fields=["status", "result", "finished_at", "next_check_at"])
        _report(
            goal,
            message_id=f"goal:{goal.id}:result",
            content=f"Goal done — {_quoted(goal)}: {result}",
        )
    logger.info("goal %s done", goal.id)
    return goal


# --- reads ------------------------------------------------------------------------------------


def goal_to_api(goal: Goal) -> dict[str, Any]:
    def iso(value):
        return value.isoformat() if value else None

    return {
        "id": goal.id,
        "text": goal.text,
        "status": goal.status,
        "result": goal.result or None,
        "report_to": goal.report_to or None,
        "session_id": goal.session_id,
        "check_every_sec": goal.check_every_sec,
        "max_turns": goal.max_turns,
        "turns_used": goal.turns_used,
        "next_check_at": iso(goal.next_check_at),
        "errors": goal.errors,
        "notes": [note.text for note in goal.notes.all()],
        "created_at": iso(goal.created_at),
        "finished_at": iso(goal.finished_at),
    }


def goal_get(*, goal_id: int, owner_id: int) -> Goal:
    goal = Goal.objects.filter(id=goal_id, owner_id=owner_id).first()
    if goal is None:
        raise GoalNotFound(goal_id)
    return goal


def goal_list(*, owner_id: int, limit: int = GOAL_PAGE_MAX) -> list[dict[str, Any]]:
    """The caller's goals: open ones first (newest first), then the finished ones."""
    goals = Goal.objects.filter(owner_id=owner_id).prefetch_related("notes")
    ordered = goals.order_by(
        Case(
            When(status__in=Goal.OPEN, then=Value(0)), default=Value(1), output_field=IntegerField()
        ),
        "-created_at",
        "-id",
    )
    return [goal_to_api(goal) for goal in ordered[:limit]]


def goals_export_for_owner(*, owner_id: int) -> list[dict[str, Any]]:
    """Every goal of the user, open and finished, oldest first, for their download."""
    goals = Goal.objects.filter(owner_id=owner_id).prefetch_related("notes")
    return [goal_to_api(goal) for goal in goals.order_by("created_at", "id")]


def goal_describe(goal: Goal) -> str:
    """One line for the chat: which goal, and what it does now."""
    return f"#{goal.id} {goal.status}: {_title(goal)}"
