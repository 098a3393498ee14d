"""Plain-SQL helpers the store's tables share."""

from __future__ import annotations

from django.db import connection


def delete_rows_of_session(model, session_id: str) -> int:
    """DELETE a session's rows of `model` in one statement. The ORM's `.delete()` runs its
    collector first (a query per related table, signals looked up) — a deleted session's
    rows have no dependants, and a session's delete is on a person's click path."""
    table = connection.ops.quote_name(model._meta.db_table)
    with connection.cursor() as cursor:
        cursor.execute(f"DELETE FROM {table} WHERE session_id = %s", [session_id])
        return cursor.rowcount
