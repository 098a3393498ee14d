"""`manage.py recover_deliveries`: queue again the schedule runs, channel deliveries and goal
check-ins that a task worker killed mid-task took with it.

The database task backend never reclaims a task whose worker died: it stays RUNNING. Run
this with `--workers-stopped` before starting the workers (no worker runs then, so every
RUNNING task is dead; `make run` does this at start), or without it at any time, e.g. from
cron, where only tasks RUNNING for longer than a turn can take count as dead. Both kinds of
task are idempotent, so queuing one too many costs nothing.
"""

from django.core.management.base import BaseCommand

from notices_app.delivery import notice_outbox_recover
from notices_app.services.goals import goals_recover
from notices_app.services.schedules import schedules_recover


class Command(BaseCommand):
    help = "Queue again schedule runs, notice deliveries and goal check-ins lost with a dead task worker."

    def add_arguments(self, parser):
        parser.add_argument(
            "--workers-stopped",
            action="store_true",
            help="no db_worker runs now: every task still marked RUNNING is a dead one",
        )

    def handle(self, *args, workers_stopped, **options):
        runs = schedules_recover(workers_stopped=workers_stopped)
        posts = notice_outbox_recover(workers_stopped=workers_stopped)
        check_ins = goals_recover(workers_stopped=workers_stopped)
        self.stdout.write(
            f"queued again: {runs} schedule run(s), {posts} delivery(ies), "
            f"{check_ins} goal check-in(s)"
        )
