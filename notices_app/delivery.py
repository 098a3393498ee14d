"""How a notice reaches the person: the target conversation, `delivered_at`, the channels.

- A schedule's notice goes to its **target conversation**: the session it was made in while
  that still exists (a test session included: test traffic stays in test sessions); else the
  user's most recently active session that is neither a test nor a sub-agent session
  (`selectors.session_delivery_target`); else a new one. A schedule made in a test session
  whose session is gone is dropped.
- `delivered_at` is set on the first delivery: a socket that received the `proactive` frame
  acknowledges it, or a channel's send succeeded.
- Outbound: a notice of a test session, or one added inside `notices_kept_inside` (test
  traffic reported into a real conversation), never leaves the process — decided here, once,
  before any channel is asked. Otherwise the transaction that adds the notice queues one task, the
  fan-out; the task worker then asks each channel of the registry for its destinations for
  the session's owner, and gives each (channel, destination) one outbox row and one send
  task, in batches. A row moves pending -> sending (a conditional update:
  one sender at a time) -> sent; a failure goes back to pending with the channel's delay and
  a new task, or to failed when the channel gives up. Rows are independent: one channel's
  failure never holds up another. A process that dies between the receiver's 2xx and the
  `sent` mark leaves the row `sending`; `notice_outbox_recover` sends it again, so that one
  edge is at-least-once.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
from collections.abc import Iterator
from datetime import datetime, timedelta

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from jarvis_site.shared.metrics import NOTICE_DELIVERIES
from notices_app.channels import CHANNELS
from notices_app.channels.base import OutboundNotice, SendResult
from notices_app.core.task_queue import (
    FAN_OUT_NOTICE,
    RUNNING_STALE_SEC,
    SEND_NOTICE,
    task_enqueue,
    task_is_waiting,
)
from notices_app.models import NoticeOutbox
from sessions_app import selectors
from sessions_app.core.ids import is_test_session
from sessions_app.selectors import Notice
from sessions_app.services.notices import notice_mark_delivered
from sessions_app.services.sessions import session_create

logger = logging.getLogger(__name__)

NEW_CONVERSATION_TITLE = "Reminders"
# A `sending` row older than an attempt's own time limit plus this margin belongs to a worker
# that died mid-attempt.
SENDING_STALE_MARGIN_SEC = 60
# Outbox rows (and their send tasks) written per transaction by a notice's fan-out.
FAN_OUT_BATCH = 100


# --- the target conversation ----------------------------------------------------------------


def schedule_target_session(*, owner_id: int, session_id: str) -> str | None:
    """The session a schedule's notice goes to, creating one when the user has none.

    None means "drop it": the schedule was made in a test session that no longer exists.
    """
    if session_id:
        meta = selectors.session_find(session_id=session_id)
        if meta is not None and meta.owner_id == owner_id:
            return meta.id
        if is_test_session(session_id):
            return None
    return notices_conversation(owner_id=owner_id)


def notices_conversation(*, owner_id: int) -> str:
    """The person's notices conversation: their most recently active session that is
    neither a test nor a sub-agent session, else a new one."""
    chosen = selectors.session_delivery_target(owner_id=owner_id)
    if chosen is not None:
        return chosen.id
    meta, _ = session_create(owner_id=owner_id, title=NEW_CONVERSATION_TITLE)
    return meta.id


# --- outbound -------------------------------------------------------------------------------

# Set while a notice that comes from test traffic is added to a real conversation (a goal set
# in a test session reports to the person's notices conversation): it stays in the process.
_kept_inside: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "notices_kept_inside", default=False
)


@contextlib.contextmanager
def notices_kept_inside(keep: bool = True) -> Iterator[None]:
    """Notices added inside this block (in this thread) are not sent out, when `keep`."""
    token = _kept_inside.set(keep)
    try:
        yield
    finally:
        _kept_inside.reset(token)


def _enqueue_send(outbox_id: int, run_after: datetime | None = None) -> str:
    return task_enqueue(SEND_NOTICE, outbox_id, run_after=run_after)


def notice_outbound_enqueue(*, session_id: str, notice: Notice) -> str | None:
    """Queue the fan-out of a new notice (`notice_fan_out`); the task's id, None for a test
    session's notice, which never leaves the process.

    Called inside the transaction that adds the notice: the one task row commits with it, or
    not at all. The rows and tasks of each destination are the task worker's work, not the
    request's nor the turn's: a user with many destinations cost that many rows and tasks
    here, under the database's write lock.
    """
    if is_test_session(session_id) or _kept_inside.get():
        return None
    return task_enqueue(
        FAN_OUT_NOTICE,
        session_id,
        notice.message_id,
        notice.content,
        notice.created_at.isoformat(),
    )


def notice_fan_out(*, session_id: str, message_id: str, content: str, created_at: str) -> int:
    """Queue a notice for every channel and destination of its session's owner (the body of
    the `fan_out_notice` task); how many rows were queued.

    Steps: read the session's owner (a session deleted since: nothing, its notices leave
    nothing behind); ask each channel for its destinations; write one outbox row and one send
    task per destination, FAN_OUT_BATCH at a time, each batch its own short transaction. A
    row that exists already is left alone, so running it twice queues nothing more.
    """
    meta = selectors.session_find(session_id=session_id)
    if meta is None:
        return 0
    user = None
    if meta.owner_id is not None:
        user = get_user_model().objects.filter(pk=meta.owner_id).first()
    payload = OutboundNotice(
        user=user.get_username() if user is not None else "",
        session_id=session_id,
        message_id=message_id,
        content=content,
        created_at=created_at,
    ).wire()
    targets = [
        (channel.name, destination)
        for channel in CHANNELS.values()
        for destination in channel.destinations(user)
    ]
    queued = 0
    for start in range(0, len(targets), FAN_OUT_BATCH):
        with transaction.atomic():
            for channel_name, destination in targets[start : start + FAN_OUT_BATCH]:
                now = timezone.now()
                row, created = NoticeOutbox.objects.get_or_create(
                    session_id=session_id,
                    message_id=message_id,
                    channel=channel_name,
                    destination=destination,
                    defaults={
                        "owner": user,
                        "payload": payload,
                        "next_attempt_at": now,
                        "created_at": now,
                    },
                )
                if created:
                    row.task_id = _enqueue_send(row.id)
                    row.save(update_fields=["task_id"])
                    queued += 1
    return queued


def _attempt(row: NoticeOutbox) -> SendResult:
    channel = CHANNELS.get(row.channel)
    if channel is None:
        return SendResult(ok=False, detail=f"no channel named {row.channel!r}", gone=True)
    notice = OutboundNotice(**row.payload, destination=row.destination)
    try:
        return channel.send(notice, row.owner)
    except Exception as error:  # noqa: BLE001 - a channel's bug is one failed attempt, logged
        logger.exception("channel %s raised on %s:%s", row.channel, row.session_id, row.message_id)
        return SendResult(ok=False, detail=f"{type(error).__name__}: {error}")


def notice_send(*, outbox_id: int) -> str:
    """One delivery attempt of an outbox row (the body of the `send_notice` task).

    Steps: claim the row (pending -> sending, one claimer wins); send through its channel
    with no lock or transaction open; on success mark it sent and the notice delivered;
    otherwise put it back to pending with the next attempt's time and queue that attempt, or
    mark it failed when the channel gives up (or the destination is gone). One log line per
    outcome. Returns "sent", "retry", "failed", or "skipped" when the row was not pending
    (already sent, or another attempt holds it).
    """
    now = timezone.now()
    claimed = NoticeOutbox.objects.filter(id=outbox_id, state=NoticeOutbox.PENDING).update(
        state=NoticeOutbox.SENDING, claimed_at=now, attempts=F("attempts") + 1
    )
    if not claimed:
        return "skipped"
    row = NoticeOutbox.objects.select_related("owner").get(id=outbox_id)
    where = f"{row.session_id}:{row.message_id} via {row.channel}"
    result = _attempt(row)
    if result.ok:
        NoticeOutbox.objects.filter(id=outbox_id, state=NoticeOutbox.SENDING).update(
            state=NoticeOutbox.SENT, sent_at=timezone.now(), last_error=""
        )
        notice_mark_delivered(session_id=row.session_id, message_id=row.message_id)
        logger.info("notice %s: sent (attempt %d)", where, row.attempts)
        NOTICE_DELIVERIES.labels(channel=row.channel, outcome="sent").inc()
        return "sent"
    channel = CHANNELS.get(row.channel)
    delay = None
    if not result.gone and channel is not None:
        delay = channel.retry_delay(row.attempts)
        if delay is not None and result.retry_after is not None:
            delay = max(delay, timedelta(seconds=result.retry_after))
    if delay is None:
        NoticeOutbox.objects.filter(id=outbox_id, state=NoticeOutbox.SENDING).update(
            state=NoticeOutbox.FAILED, last_error=result.detail[:2000]
        )
        logger.warning(
            "notice %s: given up after attempt %d: %s", where, row.attempts, result.detail
        )
        NOTICE_DELIVERIES.labels(channel=row.channel, outcome="failed").inc()
        return "failed"
    next_attempt = timezone.now() + delay
    logger.warning(
        "notice %s: attempt %d failed, next at %s: %s",
        where,
        row.attempts,
        next_attempt.isoformat(),
        result.detail,
    )
    with transaction.atomic():
        task_id = _enqueue_send(outbox_id, run_after=next_attempt)
        NoticeOutbox.objects.filter(id=outbox_id, state=NoticeOutbox.SENDING).update(
            state=NoticeOutbox.PENDING,
            next_attempt_at=next_attempt,
            last_error=result.detail[:2000],
            task_id=task_id,
        )
    NOTICE_DELIVERIES.labels(channel=row.channel, outcome="retry").inc()
    return "retry"


def notice_outbox_recover(*, now: datetime | None = None, workers_stopped: bool = False) -> int:
    """Queue again what a dead worker left behind; returns how many rows were queued.

    A worker killed mid-task leaves its task RUNNING forever (the database task backend does
    not reclaim it): a `sending` row older than an attempt's time limit plus a margin goes back
    to pending, and a pending row whose queued task is no longer waiting gets a new one.
    `workers_stopped` says no worker runs now: every `sending` row and RUNNING task is dead.
    """
    now = now or timezone.now()
    stale_sec = settings.NOTIFY_TIMEOUT_SEC + SENDING_STALE_MARGIN_SEC
    stale = now if workers_stopped else now - timedelta(seconds=stale_sec)
    running_stale_sec = 0 if workers_stopped else RUNNING_STALE_SEC
    NoticeOutbox.objects.filter(state=NoticeOutbox.SENDING, claimed_at__lte=stale).update(
        state=NoticeOutbox.PENDING, next_attempt_at=now
    )
    queued = 0
    due = NoticeOutbox.objects.filter(state=NoticeOutbox.PENDING, next_attempt_at__lte=now)
    for row in due:
        if task_is_waiting(row.task_id, running_stale_sec=running_stale_sec):
            continue
        with transaction.atomic():
            task_id = _enqueue_send(row.id)
            NoticeOutbox.objects.filter(id=row.id).update(task_id=task_id)
        queued += 1
    return queued


def notice_outbox_purge_for_session(*, session_id: str) -> int:
    """A deleted session's notices leave nothing behind, queued POSTs included."""
    deleted, _ = NoticeOutbox.objects.filter(session_id=session_id).delete()
    return deleted
