"""The admin is an inspector, not a second way to write.

Every write to a session goes through the store and the services: they assign seqs, keep
tool calls paired with their results and send the signals the memory app relies on. A form
that edited an entry, added one or deleted a session row directly could leave a history no
model provider accepts, or memory that outlives its session. So every model here is
view-only; staff read sessions, their entries in seq order, notices and live connections.
"""

import json

from django.contrib import admin
from django.db.models import Count
from django.urls import reverse
from django.utils.html import format_html, format_html_join

from sessions_app.core.admin_mixins import ReadOnlyAdminMixin
from sessions_app.models import (
    Entry,
    LiveConnection,
    ProactiveNotice,
    Session,
)

PRE_STYLE = "white-space: pre-wrap; margin: 0; max-width: 60em"


def _pre(text: str):
    return format_html('<pre style="{}">{}</pre>', PRE_STYLE, text)


def _pretty_json(value) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True)


def _tool_call_arguments(arguments: str) -> str:
    # Arguments are a JSON string (docs/design.md §3); a model may send one that does not parse, and
    # that is shown as sent because it is exactly what a reader debugging a turn needs.
    try:
        return _pretty_json(json.loads(arguments))
    except (TypeError, ValueError):
        return str(arguments)


class EntryDisplayMixin:
    """Legible renderings of an entry's text and JSON columns, shared by inline and admin."""

    @admin.display(description="content")
    def content_display(self, entry):
        return _pre(entry.content) if entry.content else "—"

    @admin.display(description="tool calls")
    def tool_calls_display(self, entry):
        if not entry.tool_calls:
            return "—"
        return format_html_join(
            "",
            '<div><strong>{}</strong> <code>{}</code><pre style="{}">{}</pre></div>',
            (
                (
                    call.get("name"),
                    call.get("id"),
                    PRE_STYLE,
                    _tool_call_arguments(call.get("arguments")),
                )
                for call in entry.tool_calls
            ),
        )

    @admin.display(description="data")
    def data_display(self, entry):
        return _pre(_pretty_json(entry.data)) if entry.data is not None else "—"

    @admin.display(description="usage")
    def usage_display(self, entry):
        return _pre(_pretty_json(entry.usage)) if entry.usage is not None else "—"


class EntryInline(ReadOnlyAdminMixin, EntryDisplayMixin, admin.TabularInline):
    model = Entry
    ordering = ("seq",)
    extra = 0
    can_delete = False
    show_change_link = True
    fields = (
        "seq",
        "kind",
        "role",
        "content_display",
        "tool_calls_display",
        "tool_call_id",
        "name",
        "is_error",
        "data_display",
        "turn_id",
        "created_at",
    )
    readonly_fields = fields


class HasParentFilter(admin.SimpleListFilter):
    title = "parent"
    parameter_name = "has_parent"

    def lookups(self, request, model_admin):
        return (("yes", "Branched (has a parent)"), ("no", "No parent"))

    def queryset(self, request, queryset):
        if self.value() == "yes":
            return queryset.filter(parent__isnull=False)
        if self.value() == "no":
            return queryset.filter(parent__isnull=True)
        return queryset


@admin.register(Session)
class SessionAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = (
        "id",
        "agent",
        "owner",
        "title",
        "parent",
        "last_seq",
        "entry_count",
        "updated_at",
    )
    list_filter = ("agent", HasParentFilter)
    search_fields = ("id", "agent", "owner__username")
    list_select_related = ("owner",)
    ordering = ("-updated_at", "-id")
    fields = (
        "id",
        "agent",
        "owner",
        "title",
        "parent",
        "branched_at_seq",
        "last_seq",
        "entry_count",
        "entries_link",
        "created_at",
        "updated_at",
        "lease_holder",
        "lease_expires_at",
    )
    readonly_fields = fields
    inlines = (EntryInline,)

    def get_queryset(self, request):
        # One aggregate in the changelist query, not one COUNT per row.
        return super().get_queryset(request).annotate(entry_count=Count("entries"))

    @admin.display(description="entries", ordering="entry_count")
    def entry_count(self, session):
        return session.entry_count

    @admin.display(description="entry list")
    def entries_link(self, session):
        url = reverse("admin:sessions_app_entry_changelist")
        return format_html(
            '<a href="{}?session__id__exact={}">entries in seq order</a>', url, session.id
        )


@admin.register(Entry)
class EntryAdmin(ReadOnlyAdminMixin, EntryDisplayMixin, admin.ModelAdmin):
    list_display = ("session_id", "seq", "kind", "role", "short_content", "turn_id", "created_at")
    list_filter = ("kind", "role", "is_error")
    search_fields = ("=session__id", "turn_id", "content")
    # History is read in seq order, never by timestamp (docs/design.md §3).
    ordering = ("session_id", "seq")
    show_full_result_count = False
    fields = (
        "session",
        "seq",
        "kind",
        "role",
        "content_display",
        "tool_calls_display",
        "tool_call_id",
        "name",
        "is_error",
        "model",
        "usage_display",
        "turn_id",
        "data_display",
        "created_at",
    )
    readonly_fields = fields

    @admin.display(description="content")
    def short_content(self, entry):
        text = entry.content or (
            entry.tool_calls and ", ".join(c["name"] for c in entry.tool_calls)
        )
        text = text or ""
        return text if len(text) <= 80 else text[:79] + "…"


@admin.register(ProactiveNotice)
class ProactiveNoticeAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ("session_id", "message_id", "short_content", "created_at", "delivered_at")
    list_filter = (("delivered_at", admin.EmptyFieldListFilter),)
    search_fields = ("=session__id", "message_id", "content")
    ordering = ("-created_at", "-id")

    @admin.display(description="content")
    def short_content(self, notice):
        return notice.content if len(notice.content) <= 80 else notice.content[:79] + "…"


@admin.register(LiveConnection)
class LiveConnectionAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ("session_id", "channel_name", "user", "connected_at", "heartbeat_at")
    list_select_related = ("user",)
    search_fields = ("=session__id", "channel_name", "user__username")
    ordering = ("-heartbeat_at",)
