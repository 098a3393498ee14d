"""Background work of notices_app, run by the task worker (`manage.py db_worker`).

Every task here is safe to run twice: a schedule's run is fired once per (schedule, run
time) by a unique row, a goal's check-in runs once per (goal, number) by its claim, a fan-out skips the outbox rows it finds, and a delivery attempt
first claims its outbox row. So a duplicate
task — a recovery that queued one more, two workers — costs a no-op, never a second notice.

The services queue these tasks by name through `task_queue` (each registers itself below,
when `NoticesAppConfig.ready` imports this module), so the task bodies sit above the
services they call and nothing imports this module but the app's wiring.
"""

from datetime import datetime

from django_tasks import task

from notices_app.core.task_queue import (
    CHECK_IN_GOAL,
    FAN_OUT_NOTICE,
    FIRE_SCHEDULE,
    SEND_NOTICE,
    task_register,
)
from notices_app.delivery import notice_fan_out, notice_send
from notices_app.services.goals import goal_check_in
from notices_app.services.schedules import schedule_fire


@task()
def fire_schedule(schedule_id: int, run_at: str) -> str:
    return schedule_fire(schedule_id=schedule_id, run_at=datetime.fromisoformat(run_at))


@task()
def send_notice(outbox_id: int) -> str:
    return notice_send(outbox_id=outbox_id)


@task()
def fan_out_notice(session_id: str, message_id: str, content: str, created_at: str) -> int:
    return notice_fan_out(
        session_id=session_id, message_id=message_id, content=content, created_at=created_at
    )


@task()
def check_in_goal(goal_id: int, number: int) -> str:
    return goal_check_in(goal_id=goal_id, number=number)


task_register(FIRE_SCHEDULE, fire_schedule)
task_register(CHECK_IN_GOAL, check_in_goal)
task_register(SEND_NOTICE, send_notice)
task_register(FAN_OUT_NOTICE, fan_out_notice)
