"""Schedules and outbound deliveries in the admin: read-only, like every model here; the one
write, cancelling a schedule, goes through the cancel service."""

from django.contrib import admin

from notices_app.models import NoticeOutbox, Schedule, ScheduleRun
from notices_app.schedules import schedule_cancel
from sessions_app.admin import ReadOnlyAdminMixin


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


@admin.register(NoticeOutbox)
class NoticeOutboxAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    """Webhook deliveries: what was sent, what waits for its next attempt and why."""

    list_display = (
        "session_id",
        "message_id",
        "state",
        "attempts",
        "next_attempt_at",
        "sent_at",
        "last_error",
    )
    list_filter = ("state",)
    search_fields = ("session_id", "message_id")
    fields = (
        "session_id",
        "message_id",
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
