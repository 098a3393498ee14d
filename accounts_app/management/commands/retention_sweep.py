"""`manage.py retention_sweep [--dry-run] [--as-of ISO-DATE] [--schedule]`: delete the
sessions past their retention policy and the export files past EXPORT_RETENTION_DAYS now
(docs/design.md §21, §31), or queue the periodic sweep that `db_worker` runs."""

from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone
from django.utils.dateparse import parse_date, parse_datetime

from accounts_app.retention import retention_sweep
from accounts_app.tasks import retention_sweep_schedule


def _as_of(text: str):
    moment = parse_datetime(text)
    if moment is None:
        day = parse_date(text)
        if day is None:
            raise CommandError(f"--as-of takes an ISO date or date-time, not {text!r}")
        moment = timezone.datetime(day.year, day.month, day.day)
    if timezone.is_naive(moment):
        moment = timezone.make_aware(moment, timezone.get_current_timezone())
    return moment


class Command(BaseCommand):
    help = (
        "Delete sessions idle past their retention policy, memory first, and export files "
        "older than EXPORT_RETENTION_DAYS."
    )

    def add_arguments(self, parser):
        parser.add_argument("--dry-run", action="store_true", help="report, delete nothing")
        parser.add_argument(
            "--as-of", metavar="ISO-DATE", help="sweep as if it were this moment (default: now)"
        )
        parser.add_argument(
            "--schedule",
            action="store_true",
            help="queue the periodic sweep for db_worker (once per deploy; harmless twice)",
        )

    def handle(self, *args, dry_run, as_of, schedule, **options):
        if schedule:
            queued = retention_sweep_schedule()
            self.stdout.write(
                "periodic sweep queued" if queued else "periodic sweep already queued"
            )
            return
        report = retention_sweep(as_of=_as_of(as_of) if as_of else None, dry_run=dry_run)
        for line in report.lines():
            self.stdout.write(line)
