# Schedules, their runs and the outbox now belong to notices_app (docs/design.md §16).
#
# The rows stay where they are and the tables are renamed to notices_app's names, rather
# than kept under their old names with Meta.db_table: a table named after the app that owns
# it is what the admin, dbshell and every later migration expect, and a rename is one cheap
# statement on SQLite and PostgreSQL (indexes and constraints keep their explicit names).
# This migration renames the tables and forgets the models; notices_app.0001 adds them to
# notices_app's state without touching the database. The reverse renames them back.

from django.db import migrations

MOVED = {
    "schedule": "notices_app_schedule",
    "schedulerun": "notices_app_schedulerun",
    "noticeoutbox": "notices_app_noticeoutbox",
}


class Migration(migrations.Migration):

    dependencies = [
        ("sessions_app", "0006_tool_approvals"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[
                migrations.AlterModelTable(name=name, table=table)
                for name, table in MOVED.items()
            ],
            state_operations=[
                migrations.DeleteModel(name="ScheduleRun"),
                migrations.DeleteModel(name="Schedule"),
                migrations.DeleteModel(name="NoticeOutbox"),
            ],
        ),
    ]
