"""Export a session as Markdown or JSON into EXPORTS_DIR/<owner id>/ (the same files as the API's export)."""

from django.core.management.base import BaseCommand, CommandError

from sessions_app.core.ids import InvalidSessionId
from sessions_app.core.owners import OPERATOR
from sessions_app.services.sessions import EXPORT_FORMATS, session_export
from sessions_app.store import SessionNotFound


class Command(BaseCommand):
    help = "Write <EXPORTS_DIR>/<owner id>/<safe id>.md or .json for a session; print its path."

    def add_arguments(self, parser):
        parser.add_argument("session_id")
        parser.add_argument("--format", choices=EXPORT_FORMATS, default="md")

    def handle(self, *args, session_id, format, **options):
        try:
            # An operator exports any user's session, into that user's directory.
            export = session_export(session_id=session_id, owner_id=OPERATOR, fmt=format)
        except (InvalidSessionId, SessionNotFound) as error:
            raise CommandError(f"no session {session_id!r}: {error}") from error
        self.stdout.write(str(export.path))
