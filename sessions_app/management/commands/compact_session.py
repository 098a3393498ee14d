"""`manage.py compact_session <id>`: what `/compact` does, from the shell."""

from django.core.management.base import BaseCommand, CommandError

from sessions_app.core.owners import OPERATOR
from sessions_app.services.sessions import NothingToCompact, session_compact
from sessions_app.store import InvalidSessionId, SessionNotFound


class Command(BaseCommand):
    help = "Summarize a session's older turns so the model sees a summary instead of them."

    def add_arguments(self, parser):
        parser.add_argument("session_id")

    def handle(self, *args, session_id, **options):
        try:
            # An operator compacts any user's session; its open tabs show the new entry.
            record = session_compact(session_id=session_id, owner_id=OPERATOR)
        except (InvalidSessionId, SessionNotFound) as error:
            raise CommandError(f"no session {session_id!r}: {error}") from error
        except NothingToCompact as error:
            raise CommandError(str(error)) from error
        data = record.data
        self.stdout.write(
            f"compacted {session_id}: about {data['tokens_before']} tokens of context before; "
            f"the model now sees the summary, then the history from seq {data['first_kept_seq']}"
        )
        self.stdout.write(data["summary"])
