"""`manage.py blobs_sweep [--schedule]`: remove the uploaded files no session links to any
more (docs/design.md §23), or queue the periodic sweep that `db_worker` runs."""

from django.core.management.base import BaseCommand

from sessions_app.services.files import blobs_sweep
from sessions_app.tasks import blobs_sweep_schedule


class Command(BaseCommand):
    help = "Remove uploaded files that no session links to any more."

    def add_arguments(self, parser):
        parser.add_argument(
            "--schedule",
            action="store_true",
            help="queue the periodic sweep for db_worker (once per deploy; harmless twice)",
        )

    def handle(self, *args, schedule, **options):
        if schedule:
            queued = blobs_sweep_schedule()
            self.stdout.write(
                "periodic sweep queued" if queued else "periodic sweep already queued"
            )
            return
        self.stdout.write(f"{blobs_sweep()} unlinked blob(s) removed")
