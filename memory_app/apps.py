from django.apps import AppConfig


class MemoryAppConfig(AppConfig):
    name = "memory_app"
    verbose_name = "Memory"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        # Imported in AppConfig.ready: apps.py is loaded while Django fills the app registry,
        # before any module that touches a model may be imported.
        from memory_app import receivers
        from memory_app.context import memory_context_for_owner
        from memory_app.tools import WORKING_MEMORY_TOOLS
        from sessions_app.core import signals
        from sessions_app.services.extensions import memory_context_provider_register, tool_register

        for tool in WORKING_MEMORY_TOOLS:
            tool_register(tool)
        # What memory knows about the owner reaches the model's system prompt (§22).
        memory_context_provider_register(memory_context_for_owner)

        signals.turn_finished.connect(receivers.on_turn_finished, dispatch_uid="memory_turn")
        signals.session_ended.connect(receivers.on_session_ended, dispatch_uid="memory_ended")
        signals.session_deleted.connect(receivers.on_session_deleted, dispatch_uid="memory_deleted")
        signals.session_compacted.connect(
            receivers.on_session_compacted, dispatch_uid="memory_compacted"
        )
        signals.working_memory_orphans_requested.connect(
            receivers.on_working_memory_orphans_requested, dispatch_uid="memory_stm_orphans"
        )
        signals.working_memory_orphan_clear_requested.connect(
            receivers.on_working_memory_orphan_clear_requested, dispatch_uid="memory_stm_clear"
        )
