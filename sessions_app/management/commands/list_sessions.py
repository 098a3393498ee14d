"""`manage.py list_sessions --user <name>`: a user's sessions, as `/sessions` shows them."""

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from sessions_app.commands import sessions_text
from sessions_app.selectors import session_list


class Command(BaseCommand):
    help = "List a user's sessions, newest activity first."

    def add_arguments(self, parser):
        parser.add_argument("--user", required=True, help="the owner (username)")
        parser.add_argument(
            "--include-subagents", action="store_true", help="also sub-agents' sessions"
        )
        parser.add_argument("--no-tests", action="store_true", help="leave test sessions out")

    def handle(self, *args, user, include_subagents, no_tests, **options):
        owner = get_user_model().objects.filter(username=user).first()
        if owner is None:
            raise CommandError(f"no user named {user!r}")
        rows = session_list(
            owner_id=owner.pk, include_tests=not no_tests, include_subagents=include_subagents
        )
        self.stdout.write(sessions_text(rows))
