"""Schedules: a reminder or a prompt a user asked for at a time, once or every N units.

Each run is one deferred task of the task worker (`fire_schedule`, `run_after` = the run's
time), executed by `manage.py db_worker`. The schedule row names the run it waits for
(`next_run_at`) and the task queued for it (`task_id`):

- firing is idempotent on (schedule, run time): the fire locks the schedule row, checks
  that this run is still the one it waits for, and records a `ScheduleRun` under a unique
  constraint — two workers, or a duplicate task, deliver one notice;
- a repeating schedule queues its next run in the transaction that fires the current one,
  at the first multiple of the interval after now: a run missed while no worker ran fires
  once when one starts, not once per missed interval;
- cancelling removes the queued task, and a fire that still starts finds the schedule
  cancelled and does nothing.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction
from django.db.models import Case, IntegerField, Value, When
from django.db.models.functions import Coalesce
from django.utils import timezone

from jarvis_site.shared.errors import Code, DomainError
from jarvis_site.shared.markdown import markdown_cut, markdown_literal
from notices_app.core.task_queue import (
    FIRE_SCHEDULE,
    RUNNING_STALE_SEC,
    task_cancel_pending,
    task_enqueue,
    task_is_waiting,
)
from notices_app.delivery import schedule_target_session
from notices_app.models import Schedule, ScheduleRun
from sessions_app import selectors
from sessions_app.core.ids import validate_session_id
from sessions_app.core.throttles import turn_throttle_wait
from sessions_app.selectors import SessionNotFound
from sessions_app.services.delegation import delegation_run
from sessions_app.services.extensions import (
    ToolAborted,
    TooManyTurns,
    TurnAbort,
    run_for_sync_caller,
)
from sessions_app.services.notices import proactive_add

logger = logging.getLogger(__name__)

UNIT_SECONDS = {"minutes": 60, "hours": 3600, "days": 86400}
MAX_TEXT_CHARS = 20_000
NOTICE_MAX_CHARS = 20_000
MAX_AHEAD = timedelta(days=3660)
MAX_REPEAT_EVERY = 10_000
# A time given as "now" by a slow client is still accepted.
PAST_TOLERANCE = timedelta(seconds=5)
REMINDER_PREFIX = "Reminder: "
# The sub-agent that runs scheduled prompts (a per_task agent: its session goes afterwards).
PROMPT_AGENT = "scratch"
# A scheduled prompt whose owner already runs MAX_TURNS_PER_USER turns tries again this
# much later.
PROMPT_BUSY_RETRY_SEC = 30
SCHEDULE_PAGE_DEFAULT = 50
SCHEDULE_PAGE_MAX = 200
# Far past any history a person keeps, and far below what the database takes as an OFFSET
# (a 64-bit integer): a larger one is a 400, not an overflow in the query.
SCHEDULE_OFFSET_MAX = 1_000_000_000


class ScheduleInvalid(DomainError, ValueError):
    """Bad input for a schedule (the API answers 400 invalid)."""

    code = Code.INVALID


class ScheduleNotFound(DomainError, LookupError):
    """No such schedule of this user (the API answers 404, for another user's too)."""

    code = Code.NOT_FOUND


class TooManySchedules(DomainError):
    """The user already has MAX_SCHEDULES_PER_USER active schedules (429 too_many_schedules)."""

    code = Code.TOO_MANY_SCHEDULES

    def __init__(self, limit: int):
        super().__init__(
            f"you already have {limit} active schedules, the most allowed; cancel one first"
        )


@dataclass(frozen=True)
class Repeat:
    every: int
    unit: str

    @property
    def interval(self) -> timedelta:
        return timedelta(seconds=self.every * UNIT_SECONDS[self.unit])


def message_id_for(schedule_id: int, run_at: datetime) -> str:
    """The notice id of one run: the same run always yields the same notice."""
    return f"schedule:{schedule_id}:{run_at.isoformat()}"


def _repeat_of(schedule: Schedule) -> Repeat | None:
    if schedule.repeat_every:
        return Repeat(schedule.repeat_every, schedule.repeat_unit)
    return None


def _next_run_after(run_at: datetime, repeat: Repeat, now: datetime) -> datetime:
    """The first run of the series after `now`: missed runs are skipped, not caught up."""
    interval = repeat.interval
    missed = max(0, int((now - run_at) / interval))
    following = run_at + interval * (missed + 1)
    while following <= now:
        following += interval
    return following


def _enqueue_fire(schedule_id: int, run_at: datetime, run_after: datetime | None = None) -> str:
    return task_enqueue(
        FIRE_SCHEDULE, schedule_id, run_at.isoformat(), run_after=run_after or run_at
    )


# --- create, cancel ---------------------------------------------------------------------------


def _validated(
    *,
    text: str,
    kind: str,
    run_at: datetime | None,
    in_seconds: float | None,
    every: int | None,
    unit: str,
    now: datetime,
) -> tuple[str, datetime, Repeat | None]:
    if not isinstance(text, str) or not text.strip():
        raise ScheduleInvalid("a schedule needs a text")
    text = text.strip()
    if len(text) > MAX_TEXT_CHARS:
        raise ScheduleInvalid(f"the text is at most {MAX_TEXT_CHARS} characters")
    if "\x00" in text:
        raise ScheduleInvalid("the text may not contain NUL characters")
    if kind not in {Schedule.REMINDER, Schedule.PROMPT}:
        raise ScheduleInvalid(f"kind is 'reminder' or 'prompt', not {kind!r}")
    repeat = None
    if every is not None or unit:
        if unit not in UNIT_SECONDS:
            raise ScheduleInvalid(f"unit is one of {', '.join(UNIT_SECONDS)}, not {unit!r}")
        if every is None:
            every = 1
        if (
            isinstance(every, bool)
            or not isinstance(every, int)
            or not 1 <= every <= MAX_REPEAT_EVERY
        ):
            raise ScheduleInvalid(f"every is a whole number from 1 to {MAX_REPEAT_EVERY}")
        repeat = Repeat(every, unit)
        if repeat.interval.total_seconds() < settings.MIN_SCHEDULE_REPEAT_SEC:
            raise ScheduleInvalid(
                f"a schedule repeats at most every {settings.MIN_SCHEDULE_REPEAT_SEC} seconds"
            )
    if (run_at is None) == (in_seconds is None):
        if run_at is None and repeat is not None:
            run_at = now + repeat.interval  # "every 2 hours": the first run is in 2 hours
        else:
            raise ScheduleInvalid("give either run_at or in_seconds")
    if in_seconds is not None:
        if isinstance(in_seconds, bool) or not isinstance(in_seconds, int | float):
            raise ScheduleInvalid("in_seconds is a number")
        if not 0 <= in_seconds <= MAX_AHEAD.total_seconds():
            raise ScheduleInvalid("in_seconds is between 0 and ten years")
        run_at = now + timedelta(seconds=in_seconds)
    if timezone.is_naive(run_at):
        raise ScheduleInvalid("run_at needs a time zone (e.g. 2030-01-01T09:00:00Z)")
    if run_at < now - PAST_TOLERANCE:
        raise ScheduleInvalid("run_at is in the past")
    if run_at > now + MAX_AHEAD:
        raise ScheduleInvalid("run_at is more than ten years ahead")
    return text, run_at, repeat


def schedule_create(
    *,
    owner_id: int,
    text: str,
    kind: str = Schedule.REMINDER,
    run_at: datetime | None = None,
    in_seconds: float | None = None,
    every: int | None = None,
    unit: str = "",
    session_id: str = "",
) -> Schedule:
    """Create a schedule and queue its first run.

    The first run is `run_at`, or `in_seconds` from now, or (a repeat given alone) one
    interval from now. `session_id` is the conversation it is made in, which must be the
    caller's. Raises ScheduleInvalid, InvalidSessionId, SessionNotFound, and TooManySchedules
    when the caller already has MAX_SCHEDULES_PER_USER active ones.
    """
    now = timezone.now()
    text, first_run, repeat = _validated(
        text=text, kind=kind, run_at=run_at, in_seconds=in_seconds, every=every, unit=unit, now=now
    )
    if session_id:
        selectors.session_get(session_id=validate_session_id(session_id), owner_id=owner_id)
    with transaction.atomic():
        # The owner's row lock makes concurrent creates of one user count one after the
        # other, so that two of them cannot both take the last free place.
        get_user_model().objects.select_for_update().filter(pk=owner_id).exists()
        active = Schedule.objects.filter(owner_id=owner_id, state=Schedule.ACTIVE).count()
        if active >= settings.MAX_SCHEDULES_PER_USER:
            raise TooManySchedules(settings.MAX_SCHEDULES_PER_USER)
        schedule = Schedule.objects.create(
            owner_id=owner_id,
            session_id=session_id,
            kind=kind,
            text=text,
            first_run_at=first_run,
            repeat_every=repeat.every if repeat else None,
            repeat_unit=repeat.unit if repeat else "",
            next_run_at=first_run,
            created_at=now,
        )
        # The task row commits with the schedule (the database task backend writes in this
        # transaction): no schedule without its run, no run of a schedule rolled back.
        schedule.task_id = _enqueue_fire(schedule.id, first_run)
        schedule.save(update_fields=["task_id"])
    logger.info("schedule %s created for user %s, first run %s", schedule.id, owner_id, first_run)
    return schedule


def schedule_cancel(*, schedule_id: int, owner_id: int) -> Schedule:
    """Cancel the caller's schedule and its queued run; cancelling twice changes nothing.

    Raises ScheduleNotFound for a missing schedule or another user's.
    """
    with transaction.atomic():
        # The same row lock a fire takes: a fire either finished before (and its next run is
        # the task removed here) or sees the schedule cancelled.
        schedule = (
            Schedule.objects.select_for_update().filter(id=schedule_id, owner_id=owner_id).first()
        )
        if schedule is None:
            raise ScheduleNotFound(schedule_id)
        if schedule.state != Schedule.ACTIVE:
            return schedule
        task_cancel_pending(schedule.task_id)
        schedule.state = Schedule.CANCELLED
        schedule.cancelled_at = timezone.now()
        schedule.next_run_at = None
        schedule.task_id = ""
        schedule.save(update_fields=["state", "cancelled_at", "next_run_at", "task_id"])
    logger.info("schedule %s cancelled by user %s", schedule_id, owner_id)
    return schedule


def schedules_cancel_matching(*, owner_id: int, text: str = "") -> list[Schedule]:
    """Cancel the caller's active schedules whose text contains `text` (all when empty)."""
    active = Schedule.objects.filter(owner_id=owner_id, state=Schedule.ACTIVE)
    if text:
        active = active.filter(text__icontains=text)
    return [
        schedule_cancel(schedule_id=schedule_id, owner_id=owner_id)
        for schedule_id in active.order_by("next_run_at").values_list("id", flat=True)
    ]


def schedules_purge_for_owner(*, owner_id: int) -> int:
    """Delete every schedule of a user whose account is being deleted, with their runs and
    queued fires; returns how many schedules went. Each active one is cancelled first (its
    queued fire removed under the row lock a fire takes), so no reminder fires for a user
    who is gone; rerunning it deletes only what is left."""
    for schedule_id in Schedule.objects.filter(
        owner_id=owner_id, state=Schedule.ACTIVE
    ).values_list("id", flat=True):
        schedule_cancel(schedule_id=schedule_id, owner_id=owner_id)
    return Schedule.objects.filter(owner_id=owner_id).delete()[0]


# --- firing -----------------------------------------------------------------------------------


def schedule_prompt_answer(*, parent_id: str, text: str) -> str:
    """Run a scheduled prompt as one turn of the `scratch` sub-agent; its final answer.

    Delegated like the main agent's `delegate` call, for the conversation the answer will
    land in (`parent_id`): the per_task session (`agent_scratch__task_<id>`, owned by the
    user) is deleted with its memory afterwards however the turn ends. A turn that does not
    end with an answer gives a notice that says so.
    """
    try:
        return run_for_sync_caller(
            delegation_run, parent_id=parent_id, agent=PROMPT_AGENT, task=text, abort=TurnAbort()
        )
    except (ValueError, RuntimeError, ToolAborted, SessionNotFound) as error:
        logger.warning("scheduled prompt in %s did not finish: %s", parent_id, type(error).__name__)
        return f"The scheduled request “{markdown_literal(text)}” did not finish: {error}"


def _content_of(schedule: Schedule, *, target: str) -> str:
    if schedule.kind == Schedule.PROMPT:
        content = schedule_prompt_answer(parent_id=target, text=schedule.text)
    else:
        # The notice is markdown; the reminder is the person's own words, shown as typed.
        content = REMINDER_PREFIX + markdown_literal(schedule.text)
    # A notice holds at most NOTICE_MAX_CHARS, wherever it comes from.
    if len(content) > NOTICE_MAX_CHARS:
        content = markdown_cut(content, NOTICE_MAX_CHARS - 1) + "…"
    return content


def _is_due_run(schedule: Schedule | None, run_at: datetime) -> bool:
    return (
        schedule is not None
        and schedule.state == Schedule.ACTIVE
        and schedule.next_run_at == run_at
    )


def schedule_fire(*, schedule_id: int, run_at: datetime) -> str:
    """Fire one run of a schedule (the body of the `fire_schedule` task).

    Steps:
    1. without a lock, skip a run that is no longer due (cancelled, already fired);
    2. make the notice's text — a prompt runs its sub-agent turn here, for the target
       conversation, with no lock held;
    3. in one transaction holding the schedule's row lock: check again that this run is
       the one the schedule waits for; record the run (unique per schedule and run time);
       choose the target conversation and add the notice (message id
       `schedule:<id>:<run time>`, which also queues the webhook); queue the next run of a
       repeating schedule, or mark a one-off done.
    A prompt's turn counts against its owner's turn limits like any other: over
    TURN_THROTTLE_RATE, or at MAX_TURNS_PER_USER, the same run is queued again for later
    (step 2 is where that is found out; nothing is recorded).
    A crash before step 3 commits leaves the run due, so the run is never lost; a crash
    after leaves it fired. Returns "delivered", "dropped", "deferred" or "skipped".
    """
    schedule = Schedule.objects.select_related("owner").filter(id=schedule_id).first()
    if not _is_due_run(schedule, run_at):
        return "skipped"
    # Chosen here too, for the prompt's turn: its sub-agent session is spawned by the
    # conversation its answer goes to. No turn runs for a run that will be dropped.
    target = schedule_target_session(owner_id=schedule.owner_id, session_id=schedule.session_id)
    if target is not None and schedule.kind == Schedule.PROMPT:
        wait = turn_throttle_wait(schedule.owner)
        if wait is not None:
            return _defer(schedule_id, run_at, wait, why="over TURN_THROTTLE_RATE")
    try:
        content = _content_of(schedule, target=target) if target is not None else ""
    except TooManyTurns:
        return _defer(schedule_id, run_at, PROMPT_BUSY_RETRY_SEC, why="at MAX_TURNS_PER_USER")
    now = timezone.now()
    with transaction.atomic():
        schedule = Schedule.objects.select_for_update().filter(id=schedule_id).first()
        if not _is_due_run(schedule, run_at):
            return "skipped"  # cancelled, or another worker fired it while this one worked
        run, created = ScheduleRun.objects.get_or_create(
            schedule=schedule, run_at=run_at, defaults={"fired_at": now}
        )
        if not created:
            return "skipped"
        target = schedule_target_session(owner_id=schedule.owner_id, session_id=schedule.session_id)
        if target is None or not content:  # no content: it was to be dropped a moment ago
            run.outcome = "dropped"
            logger.info("schedule %s: its test session is gone; run dropped", schedule.id)
        else:
            run.session_id = target
            run.message_id = message_id_for(schedule.id, run_at)
            run.outcome = "delivered"
            proactive_add(session_id=target, message_id=run.message_id, content=content)
        run.save(update_fields=["session_id", "message_id", "outcome"])
        repeat = _repeat_of(schedule)
        if repeat is None:
            schedule.state = Schedule.DONE
            schedule.next_run_at = None
            schedule.task_id = ""
        else:
            schedule.next_run_at = _next_run_after(run_at, repeat, now)
            schedule.task_id = _enqueue_fire(schedule.id, schedule.next_run_at)
        schedule.save(update_fields=["state", "next_run_at", "task_id"])
    return run.outcome


def _defer(schedule_id: int, run_at: datetime, wait: float, *, why: str) -> str:
    """Queue the same run again `wait` seconds from now (the schedule still waits for it)."""
    with transaction.atomic():
        schedule = Schedule.objects.select_for_update().filter(id=schedule_id).first()
        if not _is_due_run(schedule, run_at):
            return "skipped"
        later = timezone.now() + timedelta(seconds=wait)
        schedule.task_id = _enqueue_fire(schedule_id, run_at, run_after=later)
        schedule.save(update_fields=["task_id"])
    logger.info("schedule %s: run of %s deferred to %s (%s)", schedule_id, run_at, later, why)
    return "deferred"


def schedules_recover(*, now: datetime | None = None, workers_stopped: bool = False) -> int:
    """Queue again the due runs whose task a dead worker took with it; returns how many.

    A worker killed while it ran a fire leaves that task RUNNING forever (the database task
    backend does not reclaim it) and the schedule still waiting for the run. Queuing the
    run again is safe: firing is idempotent. `workers_stopped` says no worker runs now, so
    every RUNNING task is a dead one.
    """
    running_stale_sec = 0 if workers_stopped else RUNNING_STALE_SEC

    now = now or timezone.now()
    queued = 0
    due = Schedule.objects.filter(state=Schedule.ACTIVE, next_run_at__lte=now)
    for schedule_id, run_at, task_id in due.values_list("id", "next_run_at", "task_id"):
        if task_is_waiting(task_id, running_stale_sec=running_stale_sec):
            continue
        with transaction.atomic():
            new_task = _enqueue_fire(schedule_id, run_at)
            Schedule.objects.filter(id=schedule_id, next_run_at=run_at).update(task_id=new_task)
        queued += 1
    return queued


# --- reads ------------------------------------------------------------------------------------


def schedule_to_api(schedule: Schedule) -> dict[str, Any]:
    def iso(value):
        return value.isoformat() if value else None

    return {
        "id": schedule.id,
        "kind": schedule.kind,
        "text": schedule.text,
        "session_id": schedule.session_id or None,
        "first_run_at": iso(schedule.first_run_at),
        "every": schedule.repeat_every,
        "unit": schedule.repeat_unit or None,
        "next_run_at": iso(schedule.next_run_at),
        "state": schedule.state,
        "created_at": iso(schedule.created_at),
        "cancelled_at": iso(schedule.cancelled_at),
    }


def schedule_list(
    *,
    owner_id: int,
    include_inactive: bool = False,
    limit: int = SCHEDULE_PAGE_DEFAULT,
    offset: int = 0,
) -> dict[str, Any]:
    """One page of the caller's schedules: active ones by next run; with `include_inactive`,
    the others after them, oldest first. `next_offset` is None on the last page."""
    schedules = Schedule.objects.filter(owner_id=owner_id)
    if not include_inactive:
        schedules = schedules.filter(state=Schedule.ACTIVE)
    ordered = schedules.order_by(
        Case(
            When(state=Schedule.ACTIVE, then=Value(0)),
            default=Value(1),
            output_field=IntegerField(),
        ),
        Coalesce("next_run_at", "created_at"),
        "id",
    )
    page = list(ordered[offset : offset + limit + 1])
    return {
        "schedules": [schedule_to_api(schedule) for schedule in page[:limit]],
        "next_offset": offset + limit if len(page) > limit else None,
    }


def schedules_export_for_owner(*, owner_id: int) -> list[dict[str, Any]]:
    """Every schedule of the user, active and past, oldest first, for their download."""
    schedules = Schedule.objects.filter(owner_id=owner_id).order_by("created_at", "id")
    return [schedule_to_api(schedule) for schedule in schedules.iterator()]


def schedule_describe(schedule: Schedule) -> str:
    """One line for the agent's tools and the chat: what, when, how often."""
    what = (
        f"remind you: {schedule.text}"
        if schedule.kind == Schedule.REMINDER
        else f"ask: {schedule.text}"
    )
    when = schedule.next_run_at.strftime("%Y-%m-%d %H:%M:%S UTC") if schedule.next_run_at else "—"
    repeat = (
        f", every {schedule.repeat_every} {schedule.repeat_unit}" if schedule.repeat_every else ""
    )
    return f"#{schedule.id} {what} at {when}{repeat}"
