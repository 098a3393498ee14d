"""`manage.py export_user_data --user U FILE`: the zip `GET /api/me/export/` streams, written
to FILE for an operator (docs/design.md §21)."""

from pathlib import Path

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from accounts_app.archive import user_data_zip


class Command(BaseCommand):
    help = "Write a zip of everything a user owns: sessions (JSON and Markdown), memory, schedules."

    def add_arguments(self, parser):
        parser.add_argument("--user", required=True, help="the username")
        parser.add_argument("file", type=Path, help="where to write the zip")

    def handle(self, *args, user, file, **options):
        owner_id = (
            get_user_model().objects.filter(username=user).values_list("pk", flat=True).first()
        )
        if owner_id is None:
            raise CommandError(f"no user named {user!r}")
        written = 0
        with file.open("wb") as out:
            for chunk in user_data_zip(owner_id=owner_id):
                out.write(chunk)
                written += len(chunk)
        self.stdout.write(f"wrote {file} ({written} bytes)")
