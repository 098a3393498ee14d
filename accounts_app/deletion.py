"""Deleting an account and everything it owns (docs/design.md §21).

Resumable: the user is marked inactive first (no login, no token, so no new turn), then
each kind of data goes in a step of its own that deletes whatever of it is left, and the
user row goes last. A run that stopped halfway (a crash, a killed worker) leaves an inactive
user with part of their data; running it again finishes the job.
"""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

from django.conf import settings
from django.contrib.auth import get_user_model
from rest_framework.authtoken.models import Token

from memory_app.services import memory_purge_for_owner
from notices_app.channels.preferences import notice_channels_purge_for_owner
from notices_app.services.goals import goals_purge_for_owner
from notices_app.services.schedules import schedules_purge_for_owner
from sessions_app import selectors
from sessions_app.services.deletion import sessions_delete_for_owner
from sessions_app.services.extensions import SessionBusy
from sessions_app.services.sessions import session_turn_running

logger = logging.getLogger(__name__)


class AccountBusy(SessionBusy):
    """A turn of one of the user's sessions is running (409 session_busy): nothing was
    deleted; ask again when it has finished or after stopping it."""

    def __init__(self, session_id: str):
        super().__init__(f"a turn of session {session_id} is running; stop it or wait for it")
        self.session_id = session_id


def account_running_turn(*, owner_id: int) -> str | None:
    """The id of a session of the user whose turn runs now, if any."""
    for meta in selectors.sessions_of_owner(owner_id=owner_id):
        if session_turn_running(session_id=meta.id):
            return meta.id
    return None


def account_delete(*, user_id: int) -> bool:
    """Delete the user and everything they own; False when there is no such user (already
    deleted: a rerun is done).

    Steps: refuse with AccountBusy while one of their turns runs; mark the user inactive;
    then their sessions through the session delete service for an account
    (`sessions_delete_for_owner`: each session's memory purged first, search rows, notices,
    files and sub-agent sessions with it); the memory that belongs to the user (profile
    facts, procedures); goals with their sessions and queued check-ins; schedules, their runs
    and queued fires; API tokens; notice settings,
    push subscriptions and outbox rows; the export files (EXPORTS_DIR/<user id>); last the
    user row, which cascades what is left (import records, the retention setting, admin log
    entries).
    """
    user = get_user_model().objects.filter(pk=user_id).first()
    if user is None:
        return False
    running = account_running_turn(owner_id=user_id)
    if running is not None:
        raise AccountBusy(running)
    if user.is_active:
        user.is_active = False
        user.save(update_fields=["is_active"])
    # Before the sessions: no check-in is queued any more, nor reports, once they go.
    goals_purge_for_owner(owner_id=user_id)
    sessions_delete_for_owner(owner_id=user_id)
    memory_purge_for_owner(owner_id=user_id)
    schedules_purge_for_owner(owner_id=user_id)
    Token.objects.filter(user_id=user_id).delete()
    notice_channels_purge_for_owner(owner_id=user_id)
    shutil.rmtree(Path(settings.EXPORTS_DIR) / str(user_id), ignore_errors=True)
    user.delete()
    logger.info("account of user %s deleted", user_id)
    return True
