"""`manage.py import_sessions --user U DIR [--dry-run]`: sessions from the seed's files
(docs/design.md §20), for that user; `--from chatgpt FILE` (a ChatGPT `conversations.json`
or the export's zip) and `--from openai-agents FILE` (an openai-agents SQLiteSession
database) bring a history kept elsewhere (§21). Importing the same thing again adds
nothing."""

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from sessions_app.formats.seed_files import SeedFileError
from sessions_app.management.commands._owners import owner_id_by_username
from sessions_app.services.foreign_import import SOURCES, ForeignFormatInvalid, history_import
from sessions_app.services.transfer import SeedFilesInvalid, sessions_import


class Command(BaseCommand):
    help = (
        "Import every <id>.jsonl + <id>.meta.json of DIR as new sessions of a user, repairing "
        "unanswered tool calls; or, with --from, a ChatGPT export or an openai-agents "
        "database FILE. Sessions imported before are left as they are."
    )

    def add_arguments(self, parser):
        parser.add_argument("--user", required=True, help="the new owner (username)")
        parser.add_argument("path", type=Path, metavar="DIR_OR_FILE")
        parser.add_argument(
            "--from",
            dest="source",
            choices=SOURCES,
            help="FILE is a ChatGPT conversations.json (or its zip) or an openai-agents "
            "SQLiteSession database (default: DIR holds this project's export)",
        )
        parser.add_argument(
            "--dry-run", action="store_true", help="check and report, write nothing"
        )

    def handle(self, *args, user, path, source, dry_run, **options):
        owner_id = owner_id_by_username(user)
        if source:
            lines = self._foreign(owner_id, source, path, dry_run)
        else:
            lines = self._seed(owner_id, path, dry_run)
        for line in lines:
            self.stdout.write(line)

    def _foreign(self, owner_id, source, path, dry_run):
        if not path.is_file():
            raise CommandError(f"no file {path}")
        try:
            report = history_import(owner_id=owner_id, source=source, path=path, dry_run=dry_run)
        except ForeignFormatInvalid as error:
            raise CommandError(f"nothing imported: {error}") from error
        return report.lines()

    def _seed(self, owner_id, directory, dry_run):
        try:
            report = sessions_import(owner_id=owner_id, directory=directory, dry_run=dry_run)
        except SeedFilesInvalid as error:
            raise CommandError(f"nothing imported; fix these files first:\n{error}") from error
        except SeedFileError as error:
            raise CommandError(str(error)) from error
        return report.lines()
