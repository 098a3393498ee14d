"""Prompts waiting for a session's running turn (docs/design.md §18): the durable rows and
their order.

Run order is rank order: a prompt is added last, an interrupt's prompt before every other,
and the steers a turn leaves untaken when it closes move before every other (they were meant
for that turn; the next one is the nearest to it).
Every read and write here is fenced to an incarnation of the session: a row sent to an
earlier incarnation (the session was deleted and created again) is never listed nor run.

Who runs the queue lives above this floor (sessions_app.services.prompt_modes); a turn that ends
tells it through the runner registered with `queue_runner_register` in AppConfig.ready.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Max, Min

from jarvis_site.shared import metrics
from jarvis_site.shared.errors import Code, DomainError
from sessions_app.models import QueuedPrompt

QUEUE = "queue"
STEER = "steer"

# Called with a session id when a turn of it ends and prompts wait (runs them next).
_runner: list[Callable[[str], None]] = []


class QueueFull(DomainError):
    """The session already holds MAX_QUEUED_PER_SESSION waiting prompts (409 queue_full)."""

    code = Code.QUEUE_FULL

    def __init__(self, limit: int):
        super().__init__(f"at most {limit} prompts can wait for this session's turn")


class QueuedPromptNotFound(DomainError, LookupError):
    """No waiting prompt with this id in the session: it ran or was cancelled (404)."""

    code = Code.NOT_FOUND

    def __init__(self, queue_id: str):
        super().__init__(f"no waiting prompt {queue_id!r}: it already ran or was cancelled")


@dataclass(frozen=True)
class Waiting:
    queue_id: str
    kind: str
    text: str
    owner_id: int | None
    position: int  # 0 runs next
    attachments: list[dict] | None = None

    def to_api(self) -> dict:
        return {
            "queue_id": self.queue_id,
            "text": self.text,
            "position": self.position,
            "mode": self.kind,
        }


def queue_runner_register(runner: Callable[[str], None]) -> None:
    """Have `runner(session_id)` called when a turn ends while prompts of it wait (from an
    AppConfig.ready; one runner)."""
    _runner[:] = [runner]


def queue_turn_ended(session_id: str) -> None:
    """A turn of the session ended and released its lease: run what waits, if anything does."""
    for runner in _runner:
        runner(session_id)


def _rows(session_id: str, incarnation: str) -> list[QueuedPrompt]:
    return list(
        QueuedPrompt.objects.filter(session_id=session_id, incarnation=incarnation).order_by("rank")
    )


def _listed(rows: list[QueuedPrompt]) -> list[Waiting]:
    return [
        Waiting(row.id, row.kind, row.text, row.owner_id, position, row.attachments)
        for position, row in enumerate(rows)
    ]


def _depth_changed() -> None:
    metrics.QUEUE_DEPTH.set(QueuedPrompt.objects.count())


def queue_add(
    *,
    session_id: str,
    incarnation: str,
    owner_id: int | None,
    text: str,
    kind: str,
    first: bool = False,
    attachments: list[dict] | None = None,
) -> Waiting:
    """Store a waiting prompt at the end of the session's queue (or before every other with
    `first`); returns it with its position. The caller holds the session's lock, so two
    prompts never take the same place. Rows of an earlier incarnation go on the way.

    An interrupt's prompt (`first`) has one place of its own beyond MAX_QUEUED_PER_SESSION:
    a full queue must not stop the person from stopping the turn, and the queue stays
    bounded (a second interrupt sent before the first one ran is refused)."""
    QueuedPrompt.objects.filter(session_id=session_id).exclude(incarnation=incarnation).delete()
    current = QueuedPrompt.objects.filter(session_id=session_id)
    places = settings.MAX_QUEUED_PER_SESSION + (1 if first else 0)
    if current.count() >= places:
        raise QueueFull(settings.MAX_QUEUED_PER_SESSION)
    bounds = current.aggregate(low=Min("rank"), high=Max("rank"))
    if first:
        rank = (bounds["low"] if bounds["low"] is not None else 0) - 1
    else:
        rank = (bounds["high"] if bounds["high"] is not None else 0) + 1
    row = QueuedPrompt.objects.create(
        id=f"q_{uuid.uuid4().hex}",
        session_id=session_id,
        incarnation=incarnation,
        owner_id=owner_id,
        kind=kind,
        text=text,
        attachments=attachments or None,
        rank=rank,
    )
    transaction.on_commit(_depth_changed)
    (added,) = [item for item in _listed(_rows(session_id, incarnation)) if item.queue_id == row.id]
    return added


def queue_list(*, session_id: str, incarnation: str) -> list[Waiting]:
    """The session's waiting prompts in run order."""
    return _listed(_rows(session_id, incarnation))


def queue_head(*, session_id: str, incarnation: str) -> Waiting | None:
    """The prompt that runs next, if any."""
    rows = _rows(session_id, incarnation)
    return _listed(rows[:1])[0] if rows else None


def queue_waiting(session_id: str) -> bool:
    """Whether any prompt of the session waits (one indexed lookup; after every turn)."""
    return _any_waiting(session_id)


def _any_waiting(session_id: str, *, incarnation: str | None = None, kind: str = "") -> bool:
    """Whether a prompt of the session waits (of that incarnation and kind, when given).

    Plain SQL on the session's index: it runs at every turn's start, step and end and nearly
    always finds nothing, and the ORM's building of the query cost more than the query (2-4% of a
    worker's CPU in a storm of turns, docs/performance.md)."""
    table = QueuedPrompt._meta.db_table
    sql = f"SELECT 1 FROM {table} WHERE session_id = %s"
    params: list[str] = [session_id]
    if incarnation is not None:
        sql += " AND incarnation = %s"
        params.append(incarnation)
    if kind:
        sql += " AND kind = %s"
        params.append(kind)
    with connection.cursor() as cursor:
        cursor.execute(sql + " LIMIT 1", params)
        return cursor.fetchone() is not None


def queue_sessions() -> list[str]:
    """Every session with a waiting prompt (the recovery sweep's work list)."""
    return list(QueuedPrompt.objects.values_list("session_id", flat=True).distinct())


def queue_remove(*, session_id: str, queue_id: str) -> None:
    """Cancel a waiting prompt; QueuedPromptNotFound when it ran or was cancelled already."""
    if not QueuedPrompt.objects.filter(session_id=session_id, id=queue_id).delete()[0]:
        raise QueuedPromptNotFound(queue_id)
    transaction.on_commit(_depth_changed)


def queue_take(*, session_id: str, incarnation: str, queue_id: str) -> bool:
    """Remove the prompt a turn is about to store as its request; False when it is gone
    (cancelled meanwhile). Call inside the transaction that stores the message."""
    taken = QueuedPrompt.objects.filter(
        session_id=session_id, incarnation=incarnation, id=queue_id
    ).delete()[0]
    transaction.on_commit(_depth_changed)
    return bool(taken)


def steers_waiting(*, session_id: str, incarnation: str) -> bool:
    """Whether a steer waits for the running turn (checked at every step boundary)."""
    return _any_waiting(session_id, incarnation=incarnation, kind=STEER)


def steers_take(*, session_id: str, incarnation: str) -> list[Waiting]:
    """Remove and return the steers waiting for the running turn, in the order sent. Call
    inside the transaction that stores them as messages of that turn."""
    rows = [
        row
        for row in QueuedPrompt.objects.select_for_update()
        .filter(session_id=session_id, incarnation=incarnation, kind=STEER)
        .order_by("rank")
    ]
    if not rows:
        return []
    QueuedPrompt.objects.filter(id__in=[row.id for row in rows]).delete()
    transaction.on_commit(_depth_changed)
    return _listed(rows)


def steers_to_front(*, session_id: str, incarnation: str) -> None:
    """Move the steers a closing turn did not take before every other waiting prompt, in the
    order they were sent. Call inside the transaction that closes the turn."""
    if not _any_waiting(session_id, incarnation=incarnation, kind=STEER):
        return
    steers = list(
        QueuedPrompt.objects.select_for_update()
        .filter(session_id=session_id, incarnation=incarnation, kind=STEER)
        .order_by("rank")
    )
    if not steers:
        return
    low = QueuedPrompt.objects.filter(session_id=session_id).aggregate(low=Min("rank"))["low"]
    for offset, row in enumerate(steers):
        QueuedPrompt.objects.filter(id=row.id).update(rank=low - len(steers) + offset)


def queue_clear(*, session_id: str) -> None:
    """Remove every waiting prompt of a session that is being deleted."""
    QueuedPrompt.objects.filter(session_id=session_id).delete()
    transaction.on_commit(_depth_changed)
