"""A session's proactive notices: add one (a 🔔 message), mark one delivered.

Every write is a service (docs/design.md §16: one module per action family)."""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from sessions_app import selectors
from sessions_app.core import limits
from sessions_app.core.signals import notice_added
from sessions_app.services.broadcasts import session_broadcast_on_commit
from sessions_app.services.sessions import SIGNAL_SENDER
from sessions_app.store import (
    Notice,
    get_store,
)


def proactive_add(
    *, session_id: str, message_id: str, content: str, owner_id: int | None = None
) -> tuple[Notice, bool]:
    """Add a 🔔 notice once per message_id; open tabs get a `proactive` event after commit.

    `owner_id` given (API calls) restricts the session to that owner; the agent's own
    callers (schedules, goals) pass None. Raises InputInvalid for content or a message_id
    outside the input limits (NUL characters, too long, empty).
    """
    limits.message_id_check(message_id)
    limits.notice_check(content)
    if owner_id is not None:
        selectors.session_get(session_id=session_id, owner_id=owner_id)
    with transaction.atomic():
        notice, created = get_store().append_proactive(session_id, message_id, content)
        if created:
            # Inside the transaction: what the receivers queue (notices_app's outbound
            # deliveries) commits with the notice or not at all.
            notice_added.send(sender=SIGNAL_SENDER, session_id=session_id, notice=notice)
            session_broadcast_on_commit(
                session_id=session_id,
                event={"type": "proactive", "notice": selectors.notice_to_api(notice)},
            )
    return notice, created


def notice_mark_delivered(*, session_id: str, message_id: str) -> Notice | None:
    """Record that a notice reached the person (a socket, or an outbound channel's success);
    the first time wins."""
    return get_store().mark_proactive_delivered(session_id, message_id, timezone.now())
