"""Receivers of sessions_app: one-line calls into services (connected in AppConfig.ready)."""

from sessions_app.services import deletion


def remove_sessions_of_deleted_user(sender, instance, **kwargs):
    deletion.sessions_delete_for_owner(owner_id=instance.pk)
