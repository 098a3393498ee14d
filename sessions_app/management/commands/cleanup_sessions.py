"""`manage.py cleanup_sessions`: the `/cleanup` of the chat, for a user or for operators.

Without a category it lists what would be removed; `<category> confirm` removes it, one
line of progress per session. `--user <name>` cleans that user's sessions only;
`--all-users` every user's (an operator's sweep, e.g. from cron:
`cleanup_sessions connections confirm --all-users` clears the rows of dead workers).
"""

from django.core.management.base import BaseCommand

from sessions_app.core.owners import OPERATOR
from sessions_app.management.commands._owners import owner_id_by_username
from sessions_app.services import cleanup


class Command(BaseCommand):
    help = "List, then remove: sub-agent sessions, test sessions, working memory, dead connections."

    def add_arguments(self, parser):
        parser.add_argument("category", nargs="?", choices=cleanup.CATEGORIES)
        parser.add_argument(
            "confirm", nargs="?", choices=["confirm"], help="remove the category (as in the chat)"
        )
        owners = parser.add_mutually_exclusive_group(required=True)
        owners.add_argument("--user", help="clean up this user's sessions (username)")
        owners.add_argument(
            "--all-users", action="store_true", help="every user's sessions (operators)"
        )

    def handle(self, *args, category, confirm, user, all_users, **options):
        owner_id = OPERATOR if all_users else owner_id_by_username(user)
        if category is None or confirm is None:
            plan = cleanup.cleanup_plan(owner_id=owner_id)
            self.stdout.write(cleanup.plan_text(plan, how="manage.py cleanup_sessions"))
            if category is not None:
                self.stdout.write(f"(nothing removed: add 'confirm' to remove {category})")
            return
        report = cleanup.cleanup_run(
            owner_id=owner_id, category=category, on_progress=self._progress
        )
        self.stdout.write(cleanup.report_text(report))

    def _progress(self, line: str) -> None:
        self.stdout.write(line)
        self.stdout.flush()
