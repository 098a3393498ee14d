"""How a notice reaches the person: the target conversation, `delivered_at`, the webhook.

- A schedule's notice goes to its **target conversation**: the session it was made in while
  that still exists (a test session included: test traffic stays in test sessions); else the
  user's most recently active session that is neither a test nor a sub-agent session; else a
  new one. A schedule made in a test session whose session is gone is dropped.
- `delivered_at` is set on the first delivery: a socket that received the `proactive` frame
  acknowledges it, or the webhook answered 2xx.
- Outbound: with NOTIFY_WEBHOOK_URL, each notice of a non-test session gets one outbox row in
  the transaction that adds the notice, and a task of the worker POSTs it. The row moves
  pending -> sending (a conditional update: one sender at a time) -> sent after a 2xx; a
  failure goes back to pending with a doubling delay and a new task. A process that dies
  between the receiver's 2xx and the `sent` mark leaves the row `sending`;
  `notice_outbox_recover` sends it again, so that one edge is at-least-once. Every POST
  carries the same `Idempotency-Key` for one notice, so a receiver can drop the repeat.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from jarvis_site.metrics import NOTICE_DELIVERIES
from sessions_app.ids import is_test_session
from sessions_app.models import NoticeOutbox
from sessions_app.store import Notice, get_store

logger = logging.getLogger(__name__)

SUBAGENT_PREFIX = "agent_"
NEW_CONVERSATION_TITLE = "Reminders"
# A `sending` row older than the POST's own time limit plus this margin belongs to a worker
# that died mid-attempt.
SENDING_STALE_MARGIN_SEC = 60


# --- the target conversation ----------------------------------------------------------------


def schedule_target_session(*, owner_id: int, session_id: str) -> str | None:
    """The session a schedule's notice goes to, creating one when the user has none.

    None means "drop it": the schedule was made in a test session that no longer exists.
    """
    from sessions_app.services import session_create

    store = get_store()
    if session_id:
        meta = store.get_meta(session_id)
        if meta is not None and meta.owner_id == owner_id:
            return meta.id
        if is_test_session(session_id):
            return None
    for meta in store.list(owner_id=owner_id, include_tests=False):
        if not meta.id.startswith(SUBAGENT_PREFIX):
            return meta.id
    meta, _ = session_create(owner_id=owner_id, title=NEW_CONVERSATION_TITLE)
    return meta.id


# --- delivered_at ---------------------------------------------------------------------------


def notice_mark_delivered(*, session_id: str, message_id: str) -> Notice | None:
    """Record that a notice reached the person (a socket or the webhook); the first time wins."""
    return get_store().mark_proactive_delivered(session_id, message_id, timezone.now())


# --- outbound webhook -------------------------------------------------------------------------


def _username(owner_id: int | None) -> str:
    if owner_id is None:
        return ""
    user = get_user_model().objects.filter(pk=owner_id).first()
    return user.get_username() if user is not None else ""


def _enqueue_send(outbox_id: int, run_after: datetime | None = None) -> str:
    from sessions_app.tasks import send_notice_webhook

    task = (
        send_notice_webhook if run_after is None else send_notice_webhook.using(run_after=run_after)
    )
    return str(task.enqueue(outbox_id).id)


def notice_outbound_enqueue(*, session_id: str, notice: Notice) -> NoticeOutbox | None:
    """Queue the webhook POST of a new notice; None when nothing leaves the process.

    Called inside the transaction that adds the notice: the outbox row and its task (a row
    of the database task backend) commit together with it, or not at all.
    """
    if not settings.NOTIFY_WEBHOOK_URL or is_test_session(session_id):
        return None
    meta = get_store().get_meta(session_id)
    owner_id = meta.owner_id if meta is not None else None
    now = timezone.now()
    row, created = NoticeOutbox.objects.get_or_create(
        session_id=session_id,
        message_id=notice.message_id,
        defaults={
            "owner_id": owner_id,
            "payload": {
                "user": _username(owner_id),
                "session_id": session_id,
                "message_id": notice.message_id,
                "content": notice.content,
                "created_at": notice.created_at.isoformat(),
            },
            "next_attempt_at": now,
            "created_at": now,
        },
    )
    if created:
        row.task_id = _enqueue_send(row.id)
        row.save(update_fields=["task_id"])
    return row


def _retry_delay(attempts: int) -> timedelta:
    seconds = settings.NOTIFY_WEBHOOK_RETRY_BASE_SEC * 2 ** max(attempts - 1, 0)
    return timedelta(seconds=min(seconds, settings.NOTIFY_WEBHOOK_RETRY_MAX_SEC))


def _post(payload: dict) -> str | None:
    """POST once; None on a 2xx, else what went wrong."""
    import httpx  # here: every process loads this module at start-up, few ever POST

    url = settings.NOTIFY_WEBHOOK_URL
    if not url:
        return "NOTIFY_WEBHOOK_URL is not set"
    key = f"{payload['session_id']}/{payload['message_id']}"
    try:
        response = httpx.post(
            url,
            json=payload,
            headers={"Idempotency-Key": key},
            timeout=settings.NOTIFY_WEBHOOK_TIMEOUT_SEC,
        )
    except httpx.HTTPError as error:
        return f"{type(error).__name__}: {error}"
    if 200 <= response.status_code < 300:
        return None
    return f"HTTP {response.status_code}: {response.text[:200]}"


def notice_webhook_send(*, outbox_id: int) -> str:
    """One delivery attempt of an outbox row (the body of the `send_notice_webhook` task).

    Steps: claim the row (pending -> sending, one claimer wins); POST with no lock or
    transaction open; on a 2xx mark it sent and the notice delivered; otherwise log, put it
    back to pending with the next attempt's time and queue that attempt. Returns what
    happened: "sent", "retry", or "skipped" when the row was not pending (already sent, or
    another attempt holds it).
    """
    now = timezone.now()
    claimed = NoticeOutbox.objects.filter(id=outbox_id, state=NoticeOutbox.PENDING).update(
        state=NoticeOutbox.SENDING, claimed_at=now, attempts=F("attempts") + 1
    )
    if not claimed:
        return "skipped"
    row = NoticeOutbox.objects.get(id=outbox_id)
    error = _post(row.payload)
    NOTICE_DELIVERIES.labels(channel="webhook", outcome="failed" if error else "sent").inc()
    if error is None:
        NoticeOutbox.objects.filter(id=outbox_id, state=NoticeOutbox.SENDING).update(
            state=NoticeOutbox.SENT, sent_at=timezone.now(), last_error=""
        )
        notice_mark_delivered(session_id=row.session_id, message_id=row.message_id)
        return "sent"
    next_attempt = timezone.now() + _retry_delay(row.attempts)
    logger.warning(
        "webhook delivery of %s:%s failed (attempt %d, next at %s): %s",
        row.session_id,
        row.message_id,
        row.attempts,
        next_attempt.isoformat(),
        error,
    )
    with transaction.atomic():
        task_id = _enqueue_send(outbox_id, run_after=next_attempt)
        NoticeOutbox.objects.filter(id=outbox_id, state=NoticeOutbox.SENDING).update(
            state=NoticeOutbox.PENDING,
            next_attempt_at=next_attempt,
            last_error=error[:2000],
            task_id=task_id,
        )
    return "retry"


def notice_outbox_recover(*, now: datetime | None = None, workers_stopped: bool = False) -> int:
    """Queue again what a dead worker left behind; returns how many rows were queued.

    A worker killed mid-task leaves its task RUNNING forever (the database task backend does
    not reclaim it): a `sending` row older than the POST's time limit plus a margin goes back
    to pending, and a pending row whose queued task is no longer waiting gets a new one.
    `workers_stopped` says no worker runs now: every `sending` row and RUNNING task is dead.
    """
    from sessions_app.tasks import RUNNING_STALE_SEC, task_is_waiting

    now = now or timezone.now()
    stale_sec = settings.NOTIFY_WEBHOOK_TIMEOUT_SEC + SENDING_STALE_MARGIN_SEC
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
