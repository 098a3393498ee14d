"""Every entry carries a schema version `v` (docs/design.md §20); rows stored before read as 1.

The column is added by plain `ALTER TABLE … ADD COLUMN … DEFAULT 1` on both databases rather
than by Django's AddField: on SQLite a NOT NULL AddField rebuilds the entry table, which
drops the search triggers of 0005_search_index and copies every row; on PostgreSQL 11+ a
constant default is stored once in the catalog, so no existing row is rewritten either.
The model state is the same field Django would have made.
"""

from django.db import migrations, models

ENTRY = "sessions_app_entry"

FORWARD = {
    "postgresql": [
        f"ALTER TABLE {ENTRY} ADD COLUMN v smallint NOT NULL DEFAULT 1 CHECK (v >= 0)",
    ],
    "sqlite": [
        f'ALTER TABLE "{ENTRY}" ADD COLUMN "v" smallint unsigned NOT NULL DEFAULT 1 '
        'CHECK ("v" >= 0)',
    ],
}
REVERSE = {
    "postgresql": [f"ALTER TABLE {ENTRY} DROP COLUMN v"],
    "sqlite": [f'ALTER TABLE "{ENTRY}" DROP COLUMN "v"'],
}


def _run(statements_by_vendor):
    def run(apps, schema_editor):
        for statement in statements_by_vendor[schema_editor.connection.vendor]:
            schema_editor.execute(statement)

    return run


class Migration(migrations.Migration):
    dependencies = [("sessions_app", "0008_imported_sessions")]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[migrations.RunPython(_run(FORWARD), _run(REVERSE))],
            state_operations=[
                migrations.AddField(
                    model_name="entry",
                    name="v",
                    field=models.PositiveSmallIntegerField(db_default=1, default=1),
                ),
            ],
        ),
    ]
