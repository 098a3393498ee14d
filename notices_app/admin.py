"""Schedules, goals and outbound deliveries in the admin: read-only, like every model here;
the writes, cancelling a schedule or a goal, go through their services."""

from urllib.parse import urlsplit

from django.contrib import admin

from notices_app.models import (
    Goal,
    GoalNote,
    NoticeOutbox,
    NoticeSettings,
    PushSubscription,
    Schedule,
    ScheduleRun,
)
from notices_app.services.goals import goal_set_status
from notices_app.services.schedules import schedule_cancel
from sessions_app.core.admin_mixins import ReadOnlyAdminMixin


class ScheduleRunInline(ReadOnlyAdminMixin, admin.TabularInline):
    model = ScheduleRun
    extra = 0
    fields = ("run_at", "fired_at", "outcome", "session_id", "message_id")
    readonly_fields = fields


@admin.register(Schedule)
class ScheduleAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    """Schedules are read here; the one write is cancelling, through the cancel service."""

    list_display = ("id", "owner", "kind", "short_text", "next_run_at", "repeat", "state")
    list_filter = ("state", "kind")
    search_fields = ("text", "owner__username", "session_id")
    ordering = ("state", "next_run_at")
    fields = (
        "owner",
        "session_id",
        "kind",
        "text",
        "first_run_at",
        "repeat_every",
        "repeat_unit",
        "next_run_at",
        "state",
        "task_id",
        "created_at",
        "cancelled_at",
    )
    readonly_fields = fields
    inlines = [ScheduleRunInline]
    actions = ["cancel_schedules"]

    @admin.display(description="text")
    def short_text(self, schedule):
        return schedule.text[:80]

    @admin.display(description="repeats")
    def repeat(self, schedule):
        return (
            f"every {schedule.repeat_every} {schedule.repeat_unit}"
            if schedule.repeat_every
            else "—"
        )

    @admin.action(description="Cancel the selected schedules (and their queued runs)")
    def cancel_schedules(self, request, queryset):
        cancelled = 0
        for schedule in queryset.filter(state=Schedule.ACTIVE):
            schedule_cancel(schedule_id=schedule.id, owner_id=schedule.owner_id)
            cancelled += 1
        self.message_user(request, f"{cancelled} schedule(s) cancelled")


class GoalNoteInline(ReadOnlyAdminMixin, admin.TabularInline):
    model = GoalNote
    extra = 0
    fields = ("number", "text", "created_at")
    readonly_fields = fields


@admin.register(Goal)
class GoalAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    """Goals are read here; the one write is cancelling, through the goal's service."""

    list_display = ("id", "owner", "short_text", "status", "turns_used", "max_turns", "errors")
    list_filter = ("status",)
    search_fields = ("text", "owner__username", "session_id", "report_to")
    ordering = ("-created_at",)
    fields = (
        "owner",
        "text",
        "status",
        "result",
        "report_to",
        "outbound",
        "session_id",
        "check_every_sec",
        "max_turns",
        "turns_used",
        "check_ins",
        "checking_since",
        "next_check_at",
        "task_id",
        "errors",
        "last_error",
        "created_at",
        "finished_at",
    )
    readonly_fields = fields
    inlines = [GoalNoteInline]
    actions = ["cancel_goals"]

    @admin.display(description="text")
    def short_text(self, goal):
        return goal.text[:80]

    @admin.action(description="Cancel the selected goals (and their running check-ins)")
    def cancel_goals(self, request, queryset):
        cancelled = 0
        for goal in queryset.filter(status__in=Goal.OPEN):
            goal_set_status(goal_id=goal.id, owner_id=goal.owner_id, status=Goal.CANCELLED)
            cancelled += 1
        self.message_user(request, f"{cancelled} goal(s) cancelled")


@admin.register(NoticeOutbox)
class NoticeOutboxAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    """Deliveries per channel: what was sent, what waits for its next attempt and why."""

    list_display = (
        "session_id",
        "message_id",
        "channel",
        "state",
        "attempts",
        "next_attempt_at",
        "sent_at",
        "last_error",
    )
    list_filter = ("state", "channel")
    search_fields = ("session_id", "message_id")
    fields = (
        "session_id",
        "message_id",
        "channel",
        "destination",
        "owner",
        "payload",
        "state",
        "attempts",
        "next_attempt_at",
        "claimed_at",
        "last_error",
        "task_id",
        "created_at",
        "sent_at",
    )
    readonly_fields = fields


@admin.register(NoticeSettings)
class NoticeSettingsAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    """Each user's channels; users change them through /api/me/ and the page."""

    list_display = ("owner", "discord_enabled", "webpush_enabled", "has_discord_url")
    search_fields = ("owner__username",)
    # The Discord URL holds the webhook's secret token: shown as set or not, never in full.
    fields = ("owner", "discord_enabled", "webpush_enabled", "has_discord_url")
    readonly_fields = fields

    @admin.display(boolean=True, description="Discord URL set")
    def has_discord_url(self, chosen):
        return bool(chosen.discord_webhook_url)


@admin.register(PushSubscription)
class PushSubscriptionAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ("id", "owner", "push_service", "created_at")
    search_fields = ("owner__username",)
    fields = ("owner", "push_service", "created_at")
    readonly_fields = fields

    @admin.display(description="push service")
    def push_service(self, subscription):
        # The endpoint's path is the browser's capability URL: only its host is shown.
        return urlsplit(subscription.endpoint).hostname
