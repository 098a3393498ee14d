from django.apps import AppConfig


class MemoryAppConfig(AppConfig):
    name = "memory_app"
    verbose_name = "Memory"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        from memory_app import receivers
        from sessions_app import signals

        signals.turn_finished.connect(receivers.on_turn_finished, dispatch_uid="memory_turn")
        signals.session_ended.connect(receivers.on_session_ended, dispatch_uid="memory_ended")
        signals.session_deleted.connect(receivers.on_session_deleted, dispatch_uid="memory_deleted")
