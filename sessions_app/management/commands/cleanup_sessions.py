"""Sweep live-connection rows whose worker died (not renewed within the heartbeat timeout).

Each connect already sweeps its own session's stale rows; this clears all of them, e.g. from
cron after a crash, so the admin's connection list shows only sockets that are really open.
"""

from django.core.management.base import BaseCommand

from sessions_app.services import LIVE_TIMEOUT_SEC, connection_sweep


class Command(BaseCommand):
    help = f"Remove live connections not renewed for {LIVE_TIMEOUT_SEC} s (their worker died)."

    def handle(self, *args, **options):
        removed = connection_sweep()
        self.stdout.write(f"removed {removed} stale connection(s)")
