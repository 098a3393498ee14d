"""Admin for memory: read what the agent learned, judge the procedures it drafted.

Read-only for everyone, superusers included: memory rows are written by memory_app's
services alone (docs/design.md §9), and an edit here would bypass what they keep consistent (an
episode and its thought log, a fact's source, a procedure's decision time). The only writes
are the procedure actions, which call those services.
"""

from django.contrib import admin, messages

from memory_app.models import (
    CompactionSummary,
    Episode,
    Procedure,
    ProfileFact,
    ThoughtLog,
    WorkingMemory,
)
from memory_app.services import procedure_approve, procedure_reject
from sessions_app.core.admin_mixins import ReadOnlyAdminMixin


class ThoughtLogInline(ReadOnlyAdminMixin, admin.TabularInline):
    model = ThoughtLog
    extra = 0
    can_delete = False
    fields = ("position", "seq", "kind", "tool_name", "text", "is_error")
    readonly_fields = fields


@admin.register(Episode)
class EpisodeAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = (
        "session_id",
        "turn_id",
        "owner",
        "task_kind",
        "outcome",
        "consolidated_at",
        "created_at",
    )
    list_filter = ("task_kind", "outcome", ("consolidated_at", admin.EmptyFieldListFilter))
    search_fields = ("session_id", "turn_id", "request", "answer")
    readonly_fields = ("created_at", "consolidated_at")
    raw_id_fields = ("owner",)
    inlines = [ThoughtLogInline]


@admin.register(ThoughtLog)
class ThoughtLogAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ("session_id", "turn_id", "position", "kind", "tool_name", "is_error")
    list_filter = ("kind", "is_error")
    search_fields = ("session_id", "turn_id", "text")
    raw_id_fields = ("episode",)


@admin.register(WorkingMemory)
class WorkingMemoryAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ("session_id", "key", "value", "updated_at")
    search_fields = ("session_id", "key", "value")


@admin.register(ProfileFact)
class ProfileFactAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ("owner", "key", "text", "confidence", "source_session_id", "updated_at")
    search_fields = ("key", "text", "owner__username")
    raw_id_fields = ("owner",)


@admin.register(Procedure)
class ProcedureAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ("title", "owner", "task_kind", "status", "created_at", "decided_at")
    list_filter = ("status", "task_kind")
    search_fields = ("title", "owner__username")
    readonly_fields = ("status", "decided_at", "created_at", "source_episode_ids")
    raw_id_fields = ("owner",)
    actions = ["approve", "reject"]

    @admin.action(description="Approve the selected procedures")
    def approve(self, request, queryset):
        for procedure in queryset:
            procedure_approve(procedure_id=procedure.pk)
        self.message_user(request, f"Approved {len(queryset)} procedure(s).", messages.SUCCESS)

    @admin.action(description="Reject the selected procedures")
    def reject(self, request, queryset):
        for procedure in queryset:
            procedure_reject(procedure_id=procedure.pk)
        self.message_user(request, f"Rejected {len(queryset)} procedure(s).", messages.SUCCESS)


@admin.register(CompactionSummary)
class CompactionSummaryAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ("session_id", "entry_seq", "first_kept_seq", "tokens_before", "created_at")
    search_fields = ("session_id", "summary")
