"""`manage.py list_sessions --user <name>`: a user's sessions, as `/sessions` shows them."""

from django.core.management.base import BaseCommand

from sessions_app.management.commands._owners import owner_id_by_username
from sessions_app.selectors import session_list
from sessions_app.web.commands import sessions_text


class Command(BaseCommand):
    help = "List a user's sessions, newest activity first."

    def add_arguments(self, parser):
        parser.add_argument("--user", required=True, help="the owner (username)")
        parser.add_argument(
            "--include-subagents", action="store_true", help="also sub-agents' sessions"
        )
        parser.add_argument("--no-tests", action="store_true", help="leave test sessions out")

    def handle(self, *args, user, include_subagents, no_tests, **options):
        rows = session_list(
            owner_id=owner_id_by_username(user),
            include_tests=not no_tests,
            include_subagents=include_subagents,
        )
        self.stdout.write(sessions_text(rows))
