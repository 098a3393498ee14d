"""`manage.py import_sessions --user U DIR [--dry-run]`: sessions from the seed's files
(docs/design.md §20), for that user; importing the same directory again adds nothing."""

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from sessions_app.management.commands._owners import owner_id_by_username
from sessions_app.seed_files import SeedFileError
from sessions_app.transfer import SeedFilesInvalid, sessions_import


class Command(BaseCommand):
    help = (
        "Import every <id>.jsonl + <id>.meta.json of DIR as new sessions of a user, repairing "
        "unanswered tool calls; sessions imported before are left as they are."
    )

    def add_arguments(self, parser):
        parser.add_argument("--user", required=True, help="the new owner (username)")
        parser.add_argument("directory", type=Path)
        parser.add_argument(
            "--dry-run", action="store_true", help="check and report, write nothing"
        )

    def handle(self, *args, user, directory, dry_run, **options):
        owner_id = owner_id_by_username(user)
        try:
            report = sessions_import(owner_id=owner_id, directory=directory, dry_run=dry_run)
        except SeedFilesInvalid as error:
            raise CommandError(f"nothing imported; fix these files first:\n{error}") from error
        except SeedFileError as error:
            raise CommandError(str(error)) from error
        for line in report.lines():
            self.stdout.write(line)
