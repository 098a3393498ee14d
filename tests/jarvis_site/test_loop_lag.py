"""A worker whose event loop runs late says so: `jarvis_event_loop_lag_seconds` in `/metrics`,
and `/readyz` answers `overloaded` past OVERLOADED_LOOP_LAG_SEC (docs/design.md §26)."""

import asyncio
import threading
from contextlib import contextmanager

import pytest
from django.test import Client

from sessions_app.runtime.loop import loop_lag
from tests.helpers import GUARD_SEC, eventually
from tests.jarvis_site.test_probes import sample, scrape

pytestmark = pytest.mark.django_db

LAG = "jarvis_event_loop_lag_seconds"


@contextmanager
def stalled_worker_loop():
    """A worker's event loop, watched, then stuck in one callback until the block ends (as
    a loop is while CPU work queued on it runs); yields once the loop is late."""
    loop = asyncio.new_event_loop()
    stuck, release = threading.Event(), threading.Event()

    def stall():
        stuck.set()
        release.wait(GUARD_SEC)

    async def watch_then_stall():
        loop_lag.watch()
        loop.call_soon(stall)

    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        # Not waited for: its result would reach this thread only after the stall.
        asyncio.run_coroutine_threadsafe(watch_then_stall(), loop)
        assert stuck.wait(GUARD_SEC)
        # Late by more than the probe's limit below: the tick due 50 ms after watch() waits.
        eventually(lambda: loop_lag.worker_lag() > 0.06, what="the stuck loop's tick is overdue")
        yield loop
    finally:
        release.set()
        loop.call_soon_threadsafe(loop.stop)
        thread.join(GUARD_SEC)
        loop.close()


def test_readyz_says_overloaded_while_the_loop_runs_later_than_the_limit(settings):
    settings.OVERLOADED_LOOP_LAG_SEC = 0.01
    with stalled_worker_loop():
        response = Client().get("/readyz")
    assert (response.status_code, response.json()) == (503, {"status": "overloaded"})


def test_readyz_ignores_the_lag_when_no_limit_is_set(settings):
    assert settings.OVERLOADED_LOOP_LAG_SEC == 0  # the default: off
    with stalled_worker_loop():
        response = Client().get("/readyz")
    assert (response.status_code, response.json()) == (200, {"status": "ok"})


def test_metrics_show_how_late_the_loop_ran():
    before = scrape()
    count, total = sample(before, f"{LAG}_count"), sample(before, f"{LAG}_sum")
    with stalled_worker_loop():
        stalled_for = loop_lag.worker_lag()
    # Once released, the overdue tick runs and observes its lateness.
    after = eventually(
        lambda: (text := scrape()) and sample(text, f"{LAG}_count") > count and text,
        what="the overdue tick was observed",
    )
    assert sample(after, f"{LAG}_sum") - total >= stalled_for
    # The late tick lands in a bucket above 50 ms; a quiet tick would be in the first one.
    assert sample(after, f"{LAG}_bucket", le="0.05") < sample(after, f"{LAG}_bucket", le="+Inf")
