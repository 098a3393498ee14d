"""Every Prometheus metric of Jarvis, in one place (docs/design.md §19, docs/deploy.md).

The code that counts imports the object it needs from here; nothing else defines a metric,
so this module is the list an operator reads.

Several processes serve one deployment (Daphne workers, the task worker). When
PROMETHEUS_MULTIPROC_DIR names a directory, prometheus-client keeps each process's values in
files there (the variable must be set before this module is first imported, which
jarvis_site.settings guarantees by reading .env into the environment) and `/metrics` on any
worker sums them all. Without it, `/metrics` shows the serving process alone.
"""

from __future__ import annotations

import logging
import os

from prometheus_client import (
    REGISTRY,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
    generate_latest,
    multiprocess,
)

# The `_created` series (when each counter began) say nothing an operator acts on.
disable_created_metrics()

# Turn times go from a fast offline answer (milliseconds) to a slow model with tools
# (minutes); the overhead, what Jarvis itself adds, should stay in the low milliseconds.
TURN_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600)
OVERHEAD_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5)
MODEL_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120)

TURNS = Counter("jarvis_turns", "Turns that ended, by their turn_end status.", ["status"])
TURN_DURATION = Histogram(
    "jarvis_turn_duration_seconds",
    "Wall time of a turn, from its start to its turn_end.",
    buckets=TURN_BUCKETS,
)
TURN_OVERHEAD = Histogram(
    "jarvis_turn_overhead_seconds",
    "A turn's wall time minus the time spent waiting for the model and for tools.",
    buckets=OVERHEAD_BUCKETS,
)
MODEL_CALL = Histogram(
    "jarvis_model_call_seconds", "Wall time of one model call.", buckets=MODEL_BUCKETS
)
# Each process counts its own sockets; a dead process's count leaves the sum once its
# supervisor marks it dead (multiprocess.mark_process_dead).
WS_CONNECTIONS = Gauge(
    "jarvis_ws_connections", "Open WebSocket connections.", multiprocess_mode="livesum"
)
EVENTS_SENT = Counter(
    "jarvis_events_sent", "Session events sent to sockets and other workers (one per event, §17)."
)
EVENTS_DROPPED = Counter(
    "jarvis_events_dropped",
    "Session events a socket's full inbox refused (the client resyncs from last_seq).",
)
LEASE_BUSY = Counter(
    "jarvis_lease_busy",
    "Requests refused with session_busy: the session's previous turn still held its lease.",
)
REPAIRS = Counter("jarvis_repairs", "Turns left open by a dead process and closed as interrupted.")
# Prompts waiting for a session's running turn to end (modes queue and steer, docs/design.md
# §18): the number of waiting rows of the whole deployment, as of its last change (set by
# sessions_app.runtime.turn.queue after each commit that changes it).
QUEUE_DEPTH = Gauge(
    "jarvis_queue_depth", "Prompts queued behind running turns.", multiprocess_mode="mostrecent"
)
# How late a worker's event loop ran a tick scheduled every 50 ms (sessions_app.runtime.
# loop_lag): near 0 while the worker keeps up; past a few hundred ms every socket of it waits.
EVENT_LOOP_LAG = Histogram(
    "jarvis_event_loop_lag_seconds",
    "How late the worker's event loop ran a tick scheduled every 50 ms.",
    buckets=(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
)
NOTICE_DELIVERIES = Counter(
    "jarvis_notice_deliveries",
    "Outbound notice delivery attempts, by channel and outcome (sent, retry, failed).",
    ["channel", "outcome"],
)


class RedisDropCounter(logging.Filter):
    """Counts into EVENTS_DROPPED the sockets a channels-redis group send could not reach:
    the library drops those messages and says so only in its log ("N of M channels over
    capacity in group G"). Installed on its logger by jarvis_site.settings.LOGGING."""

    def filter(self, record: logging.LogRecord) -> bool:
        if str(record.msg).startswith("%s of %s channels over capacity") and record.args:
            EVENTS_DROPPED.inc(int(record.args[0]))
        return True


def metrics_dir() -> str:
    return os.environ.get("PROMETHEUS_MULTIPROC_DIR", "")


def metrics_exposition() -> bytes:
    """The Prometheus text format of every process writing to PROMETHEUS_MULTIPROC_DIR, or of
    this process alone when it is unset."""
    if not metrics_dir():
        return generate_latest(REGISTRY)
    registry = CollectorRegistry()
    multiprocess.MultiProcessCollector(registry)
    return generate_latest(registry)


def process_gone(pid: int) -> None:
    """Drop a stopped process's live gauges (its sockets) from the sum; its counters stay."""
    if metrics_dir():
        multiprocess.mark_process_dead(pid)
