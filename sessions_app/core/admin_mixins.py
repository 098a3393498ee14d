"""What every app's admin shares (sessions_app's, memory_app's): a module of its own, so that
one app's admin reuses it without importing another app's admin, an entry point
(docs/design.md §16)."""


class ReadOnlyAdminMixin:
    """View permission only: no add, change or delete form, for any user."""

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False
