"""Watching a real server's health from outside while a test makes it work: how long its
`/healthz` takes, and the CPU its process spends."""

from __future__ import annotations

import os
import threading
import time
import urllib.request

from tests.helpers import GUARD_SEC


class HealthWatch:
    """Asks `/healthz` again and again on a thread of its own until stopped; `slowest` is the
    longest answer seen. Entered once the first answer is in, so the work a test starts next
    is watched from its first moment."""

    def __init__(self, base: str):
        self.base = base
        self.latencies: list[float] = []
        self._stop = threading.Event()
        self._first = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def _watch(self):
        while not self._stop.is_set():
            started = time.monotonic()
            try:
                with urllib.request.urlopen(self.base + "/healthz", timeout=GUARD_SEC) as answer:
                    answer.read()
            except OSError:
                pass  # no answer in GUARD_SEC: counted as that long
            self.latencies.append(time.monotonic() - started)
            self._first.set()
            self._stop.wait(0.05)

    @property
    def slowest(self) -> float:
        return max(self.latencies)

    def __enter__(self):
        self._thread.start()
        assert self._first.wait(GUARD_SEC), "the server answers /healthz"
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join(GUARD_SEC)


def cpu_seconds(pid: int) -> float:
    """CPU time the process and its reaped children have spent (user + system)."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    ticks = sum(int(value) for value in fields[11:15])  # utime stime cutime cstime
    return ticks / os.sysconf("SC_CLK_TCK")
