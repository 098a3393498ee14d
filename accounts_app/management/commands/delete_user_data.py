"""`manage.py delete_user_data --user U`: delete the account and everything it owns
(docs/design.md §21); a rerun after a crash finishes the job."""

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from accounts_app.deletion import AccountBusy, account_delete


class Command(BaseCommand):
    help = "Delete a user with their sessions, memory, schedules, tokens, exports and settings."

    def add_arguments(self, parser):
        parser.add_argument("--user", required=True, help="the username")

    def handle(self, *args, user, **options):
        found = get_user_model().objects.filter(username=user).values_list("pk", flat=True).first()
        if found is None:
            self.stdout.write(f"no user named {user!r}: nothing to delete")
            return
        try:
            account_delete(user_id=found)
        except AccountBusy as busy:
            raise CommandError(str(busy)) from busy
        self.stdout.write(f"deleted user {user!r} and everything they owned")
