"""Receivers of sessions_app: one-line calls into services (connected in AppConfig.ready)."""

from sessions_app.services import deletion, session_events, shares


def remove_sessions_of_deleted_user(sender, instance, **kwargs):
    deletion.sessions_delete_for_owner(owner_id=instance.pk)


def announce_answer(sender, *, session_id, **kwargs):
    session_events.session_updated_on_commit(session_id=session_id)


def announce_title(sender, *, session_id, **kwargs):
    session_events.session_updated_on_commit(session_id=session_id)


def forget_deleted_session(sender, *, session_id, owner_id, **kwargs):
    shares.shares_remove_for_session(session_id=session_id)
    session_events.session_deleted_on_commit(session_id=session_id, owner_id=owner_id)
