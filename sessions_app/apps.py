from django.apps import AppConfig
from django.conf import settings
from django.db.backends.signals import connection_created
from django.db.models.signals import pre_delete


class SessionsAppConfig(AppConfig):
    name = "sessions_app"
    verbose_name = "Sessions"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        from jarvis_site.sqlite_wal import keep_wal_open
        from sessions_app import receivers
        from sessions_app.agents import agent_registry

        agent_registry()  # a broken JARVIS_AGENTS_FILE stops start-up with what is wrong

        connection_created.connect(keep_wal_open, dispatch_uid="jarvis_site.keep_wal_open")

        # pre_delete runs inside the user's delete transaction, before the database cascade:
        # a purge that fails keeps the account and everything it owns.
        pre_delete.connect(
            receivers.remove_sessions_of_deleted_user,
            sender=settings.AUTH_USER_MODEL,
            dispatch_uid="sessions_app.remove_sessions_of_deleted_user",
        )
