"""`manage.py consolidate_memory`: consolidate a session now, or sweep idle sessions.

`--idle --loop SECONDS` is the long-running sweeper that runs beside Daphne and the task
worker: every SECONDS it queues consolidation for sessions idle CONSOLIDATE_IDLE_SEC.
"""

import signal
import threading

from django.core.management.base import BaseCommand, CommandError
from django.db import close_old_connections

from memory_app.services import memory_consolidate
from memory_app.tasks import memory_consolidate_idle


class Command(BaseCommand):
    help = "Consolidate memory: one session now (--session) or every idle session (--idle)."

    def add_arguments(self, parser):
        target = parser.add_mutually_exclusive_group(required=True)
        target.add_argument("--session", help="consolidate this session now, in this process")
        target.add_argument(
            "--idle",
            action="store_true",
            help="queue consolidation for sessions idle CONSOLIDATE_IDLE_SEC",
        )
        parser.add_argument(
            "--loop",
            type=float,
            metavar="SECONDS",
            help="with --idle: sweep again every SECONDS until stopped",
        )

    def handle(self, *args, session, idle, loop, **options):
        if session:
            if loop is not None:
                raise CommandError("--loop goes with --idle")
            result = memory_consolidate(session_id=session)
            self.stdout.write(
                f"{session}: {result['episodes']} episode(s), {result['facts']} fact(s), "
                f"{result['procedures']} procedure draft(s)"
            )
            return
        if loop is None:
            self._sweep()
            return
        if loop <= 0:
            raise CommandError("--loop needs a positive number of seconds")
        stop = threading.Event()
        # SIGTERM from `make run` (or a process manager) ends the loop between sweeps.
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
        signal.signal(signal.SIGINT, lambda *_: stop.set())
        while not stop.is_set():
            # A connection held across long sleeps may have been closed by the server.
            close_old_connections()
            self._sweep()
            stop.wait(loop)

    def _sweep(self):
        queued = memory_consolidate_idle()
        if queued:
            self.stdout.write(f"queued consolidation of {len(queued)} idle session(s)")
