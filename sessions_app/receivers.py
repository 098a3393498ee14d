"""Receivers of sessions_app: one-line calls into services (connected in AppConfig.ready)."""

from sessions_app import delivery, services


def remove_sessions_of_deleted_user(sender, instance, **kwargs):
    services.sessions_delete_for_owner(owner_id=instance.pk)


def purge_outbox_of_deleted_session(sender, session_id, **kwargs):
    delivery.notice_outbox_purge_for_session(session_id=session_id)
