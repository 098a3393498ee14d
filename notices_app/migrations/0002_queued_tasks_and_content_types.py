# The data that named the moved code by its old place (docs/design.md §16):
# - tasks already queued in the database task backend name their function by import path:
#   a schedule's next run and a pending delivery must still run after the move;
# - the content types (and with them admin permissions and the admin's history) of the
#   moved models follow them, unless notices_app's were already made.

from django.db import migrations

TASK_PATHS = {
    "sessions_app.tasks.fire_schedule": "notices_app.tasks.fire_schedule",
    "sessions_app.tasks.send_notice_webhook": "notices_app.tasks.send_notice",
}
MODELS = ["schedule", "schedulerun", "noticeoutbox"]


def _move(apps, paths, old_label, new_label):
    DBTaskResult = apps.get_model("django_tasks_database", "DBTaskResult")
    for old, new in paths.items():
        DBTaskResult.objects.filter(task_path=old).update(task_path=new)
    ContentType = apps.get_model("contenttypes", "ContentType")
    if not ContentType.objects.filter(app_label=new_label, model__in=MODELS).exists():
        ContentType.objects.filter(app_label=old_label, model__in=MODELS).update(
            app_label=new_label
        )


def forwards(apps, schema_editor):
    _move(apps, TASK_PATHS, "sessions_app", "notices_app")


def backwards(apps, schema_editor):
    _move(apps, {new: old for old, new in TASK_PATHS.items()}, "notices_app", "sessions_app")


class Migration(migrations.Migration):

    dependencies = [
        ("notices_app", "0001_initial"),
        ("contenttypes", "0002_remove_content_type_name"),
        ("django_tasks_database", "__first__"),
    ]

    operations = [migrations.RunPython(forwards, backwards)]
