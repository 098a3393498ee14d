from django.apps import AppConfig
from django.conf import settings
from django.db.backends.signals import connection_created
from django.db.models.signals import pre_delete

from jarvis_site.shared.sqlite_wal import keep_wal_open


class SessionsAppConfig(AppConfig):
    name = "sessions_app"
    verbose_name = "Sessions"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        # Imported in AppConfig.ready: apps.py is loaded while Django fills the app registry,
        # before any module that touches a model may be imported.
        from sessions_app.core import signals
        from sessions_app.runtime.mcp.config import mcp_servers
        from sessions_app.runtime.sandbox.run_code import RUN_CODE_TOOL
        from sessions_app.runtime.tools.registry import tool_register
        from sessions_app.runtime.turn.agents import agent_registry
        from sessions_app.runtime.turn.approvals import approval_decisions_poll
        from sessions_app.runtime.turn.lease import lease_poll_hook_register
        from sessions_app.runtime.turn.queue import queue_runner_register
        from sessions_app.services import prompt_modes, receivers
        from sessions_app.services.delegation import DELEGATE_TOOL
        from sessions_app.store.workers import heartbeat_hook_register

        # Before the agents are checked: the main agent must hold `delegate`.
        tool_register(DELEGATE_TOOL)
        tool_register(RUN_CODE_TOOL)
        agent_registry()  # a broken JARVIS_AGENTS_FILE stops start-up with what is wrong
        mcp_servers()  # and so does a broken MCP_SERVERS_FILE
        # A decision on a tool approval may be written by any worker: the lease keeper,
        # which already polls while a turn runs, looks for those this process waits on.
        lease_poll_hook_register(approval_decisions_poll)
        # A turn that ends runs the prompts queued behind it (docs/design.md §18); each
        # server process also sweeps for queues a dead worker left behind.
        queue_runner_register(prompt_modes.queue_kick)
        heartbeat_hook_register(prompt_modes.queue_sweep)

        # The person's live list (docs/design.md §24) and share links follow the sessions.
        signals.turn_finished.connect(receivers.announce_answer, dispatch_uid="sessions_answer")
        signals.session_retitled.connect(receivers.announce_title, dispatch_uid="sessions_title")
        signals.session_deleted.connect(
            receivers.forget_deleted_session, dispatch_uid="sessions_forget_deleted"
        )

        connection_created.connect(keep_wal_open, dispatch_uid="jarvis_site.keep_wal_open")

        # pre_delete runs inside the user's delete transaction, before the database cascade:
        # a purge that fails keeps the account and everything it owns.
        pre_delete.connect(
            receivers.remove_sessions_of_deleted_user,
            sender=settings.AUTH_USER_MODEL,
            dispatch_uid="sessions_app.remove_sessions_of_deleted_user",
        )
