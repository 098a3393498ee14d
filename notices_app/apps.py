from django.apps import AppConfig
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured


class NoticesAppConfig(AppConfig):
    """Schedules, their runs, and how a notice leaves the process (docs/design.md §14, §16).

    sessions_app never imports this app: it announces new notices and deleted sessions with
    signals, runs the `schedule` / `unschedule` / `goal_update` / `goal_done` tools through
    its tool registry and `/goal` through its command registry, all filled in here.
    """

    name = "notices_app"
    verbose_name = "Notices"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        # Imported here: an AppConfig module is loaded before the models are ready.
        from jarvis_site.shared.outbound_urls import (
            OutboundUrlRefused,
            allowed_hosts,
            outbound_target,
        )
        from notices_app import tasks  # noqa: F401 - importing it registers the tasks by name
        from notices_app.core.vapid import vapid_keys
        from notices_app.extensions import receivers
        from notices_app.extensions.commands import goal_command, goals_command
        from notices_app.extensions.tools import GOAL_TOOLS, SCHEDULE_TOOLS
        from sessions_app.core import signals
        from sessions_app.core.command_registry import command_register
        from sessions_app.services.extensions import tool_register

        # A bad VAPID key or allowlist entry stops start-up with what is wrong, instead of
        # failing every delivery later.
        vapid_keys()
        allowed_hosts()
        if settings.NOTIFY_WEBHOOK_URL:
            try:
                outbound_target(settings.NOTIFY_WEBHOOK_URL, allowlisted=False)
            except OutboundUrlRefused as refused:
                raise ImproperlyConfigured(f"NOTIFY_WEBHOOK_URL: {refused}") from refused

        for tool in (*SCHEDULE_TOOLS, *GOAL_TOOLS):
            tool_register(tool)
        command_register(
            "goal",
            goal_command,
            usage="<text>",
            about="set a goal: Jarvis works on it over time and reports its notes and result here",
        )
        command_register(
            "goals",
            goals_command,
            usage="[pause|resume|cancel <id>]",
            about="your goals and what each does now; pause, resume or cancel one by its id",
        )

        signals.notice_added.connect(receivers.on_notice_added, dispatch_uid="notices_added")
        signals.session_deleted.connect(
            receivers.on_session_deleted, dispatch_uid="notices_session_deleted"
        )
