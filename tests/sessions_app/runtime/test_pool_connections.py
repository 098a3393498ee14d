"""A pool thread keeps its database connection while work keeps coming and lets go of it
once it has had none for POOL_IDLE_CLOSE_SEC (runtime.loop.executors): under a storm, writes come
and go, and a connection opened for each of them costs the database a new process."""

import threading

import pytest
from django.db import connection

from sessions_app.runtime.loop import executors
from tests.helpers import GUARD_SEC

pytestmark = pytest.mark.django_db(transaction=True)


def _the_threads_connection():
    connection.ensure_connection()
    return connection.connection


class _ClosesSeen:
    """Stands in for `django.db.connections` in the executor: counts its threads' closes."""

    def __init__(self, real):
        self.real = real
        self.closed = threading.Event()

    def close_all(self):
        self.real.close_all()
        self.closed.set()


@pytest.fixture
def closes(monkeypatch):
    seen = _ClosesSeen(executors.connections)
    monkeypatch.setattr(executors, "connections", seen)
    return seen


def test_work_that_keeps_coming_keeps_its_connection(closes):
    pool = executors.ClosingExecutor(1, "test-keep", idle_close_sec=GUARD_SEC * 10)
    try:
        first = pool.submit(_the_threads_connection).result(GUARD_SEC)
        second = pool.submit(_the_threads_connection).result(GUARD_SEC)
        assert second is first
        assert not closes.closed.is_set()
    finally:
        pool.shutdown(wait=True)
    assert closes.closed.is_set(), "a pool that shuts down closes its threads' connections"


def test_a_thread_without_work_lets_go_of_its_connection(closes):
    pool = executors.ClosingExecutor(1, "test-idle", idle_close_sec=0.01)
    try:
        first = pool.submit(_the_threads_connection).result(GUARD_SEC)
        assert closes.closed.wait(GUARD_SEC), "the idle thread closes its connection"
        again = pool.submit(_the_threads_connection).result(GUARD_SEC)
        assert again is not first
    finally:
        pool.shutdown(wait=True)


def test_without_a_delay_the_connection_goes_as_soon_as_the_work_is_done(closes):
    pool = executors.ClosingExecutor(1, "test-at-once", idle_close_sec=0)
    try:
        first = pool.submit(_the_threads_connection).result(GUARD_SEC)
        assert closes.closed.wait(GUARD_SEC)
        assert pool.submit(_the_threads_connection).result(GUARD_SEC) is not first
    finally:
        pool.shutdown(wait=True)


def test_without_a_delay_every_thread_lets_go_not_only_the_last_to_finish(monkeypatch):
    # Two threads work at once; the first to finish still had the other's work pending.
    # Each closes its own connection once it finds nothing to do (a test database cannot
    # be dropped while an idle pool thread holds a connection to it).
    closed_by: set[int] = set()
    both_closed = threading.Event()
    real = executors.connections

    class ThreadsClosing:
        def close_all(self):
            real.close_all()
            closed_by.add(threading.get_ident())
            if len(closed_by) == 2:
                both_closed.set()

    monkeypatch.setattr(executors, "connections", ThreadsClosing())
    both_working = threading.Barrier(2, timeout=GUARD_SEC)
    first_done = threading.Event()

    def work(first: bool):
        _the_threads_connection()
        both_working.wait()
        if first:
            first_done.set()
        else:
            first_done.wait(GUARD_SEC)  # still working when the other finishes
        return threading.get_ident()

    pool = executors.ClosingExecutor(2, "test-every-thread", idle_close_sec=0)
    try:
        threads = {pool.submit(work, True), pool.submit(work, False)}
        workers = {future.result(GUARD_SEC) for future in threads}
        assert len(workers) == 2
        assert both_closed.wait(GUARD_SEC), f"only {len(closed_by)} of 2 threads closed"
        assert closed_by == workers
    finally:
        pool.shutdown(wait=True)
