"""`manage.py export_sessions --user U DIR`: a user's sessions as the seed's files (docs/design.md §20)."""

from pathlib import Path

from django.core.management.base import BaseCommand

from sessions_app.management.commands._owners import owner_id_by_username
from sessions_app.services.transfer import sessions_export


class Command(BaseCommand):
    help = (
        "Write every session of a user into DIR as <id>.jsonl and <id>.meta.json, "
        "for import_sessions on this or another installation."
    )

    def add_arguments(self, parser):
        parser.add_argument("--user", required=True, help="the owner (username)")
        parser.add_argument("directory", type=Path, help="created if missing")

    def handle(self, *args, user, directory, **options):
        exported = sessions_export(owner_id=owner_id_by_username(user), directory=directory)
        for session in exported:
            self.stdout.write(f"exported {session.session_id} ({session.entries} entries)")
        self.stdout.write(f"{len(exported)} session(s) written to {directory}")
