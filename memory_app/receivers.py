"""Handlers of sessions_app's signals: one call into a service each (STYLE: signals)."""

from memory_app.services import (
    episode_record_for_turn,
    memory_consolidate_enqueue,
    memory_purge_for_session,
)


def on_turn_finished(sender, *, session_id, owner_id, turn_id, status, entries, **kwargs):
    episode_record_for_turn(
        session_id=session_id, owner_id=owner_id, turn_id=turn_id, status=status, entries=entries
    )


def on_session_ended(sender, *, session_id, owner_id=None, **kwargs):
    memory_consolidate_enqueue(session_id=session_id)


def on_session_deleted(sender, *, session_id, owner_id=None, **kwargs):
    # Directly, not on commit: the purge is part of the delete's transaction, so a purge that
    # fails keeps the session too.
    memory_purge_for_session(session_id=session_id)
