"""Helpers for tests that leave the test process: threads and child processes."""

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

from django.conf import settings
from django.db import connection, connections

REPO = Path(__file__).resolve().parent.parent

# How long a test waits for something that must happen before it calls the run stuck. It
# guards against hanging and is never what a test measures: generous, so that a loaded
# two-core machine never reaches it on a healthy run.
GUARD_SEC = 60


def eventually(
    predicate, *, what: str, limit: float = GUARD_SEC, interval: float = 0.05, fail: bool = True
):
    """Poll until `predicate()` is truthy and return its value: for a state another process
    reaches that the test can only read (a row, a file). Fails only after `limit`; with
    `fail=False` it returns the last falsy value instead, for a caller that tries again."""
    deadline = time.monotonic() + limit
    while not (value := predicate()):
        if time.monotonic() >= deadline:
            assert not fail, f"timed out waiting until {what}"
            return value
        time.sleep(interval)
    return value


def database_url_of_test_db() -> str:
    """A DATABASE_URL naming the database this test run created, for child processes."""
    current = connection.settings_dict
    if settings.DATABASE_VENDOR == "postgresql":
        user = current["USER"] or ""
        return f"postgres://{user}@{current['HOST']}:{current['PORT']}/{current['NAME']}"
    return f"sqlite:///{current['NAME']}"


def child_env(**extra) -> dict:
    env = dict(os.environ)
    env["DATABASE_URL"] = database_url_of_test_db()
    env["SESSIONS_DIR"] = str(settings.SESSIONS_DIR)
    env["EXPORTS_DIR"] = str(settings.EXPORTS_DIR)
    env["DJANGO_SETTINGS_MODULE"] = "jarvis_site.settings"
    # Servers a test starts name conversations by their first words unless the test asks for
    # model-written titles: a title call after each first answer would take a reply the test
    # scripted for something else.
    env.setdefault("TITLE_MODEL", "offline")
    env.update({key: str(value) for key, value in extra.items()})
    return env


def run_chat(*args: str, lines: str = "", **env) -> subprocess.CompletedProcess:
    """`manage.py chat ARGS` in a fresh interpreter against the test database, with `lines`
    piped in as a person typing them."""
    return subprocess.run(
        [sys.executable, "manage.py", "chat", *args],
        input=lines,
        cwd=REPO,
        env=child_env(**env),
        capture_output=True,
        text=True,
        timeout=GUARD_SEC,
        check=False,
    )


def run_python(code: str, timeout: float = GUARD_SEC, **env) -> subprocess.CompletedProcess:
    """Run Django code in a fresh interpreter against the test database."""
    prelude = "import django; django.setup()\n"
    return subprocess.run(
        [sys.executable, "-c", prelude + code],
        cwd=REPO,
        env=child_env(**env),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def run_in_threads(target, count: int, timeout: float = GUARD_SEC) -> list:
    """Start `count` threads at once (a barrier), return their results or raise their errors."""
    barrier = threading.Barrier(count)
    results: list = [None] * count
    errors: list = []

    def worker(index):
        try:
            barrier.wait()
            results[index] = target(index)
        except BaseException as error:  # noqa: BLE001 - re-raised in the test thread
            errors.append(error)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout)
    if errors:
        raise errors[0]
    return results


def start_python(code: str, **env) -> subprocess.Popen:
    """Like run_python, but returns at once: for tests that race or kill child processes."""
    prelude = "import django; django.setup()\n"
    return subprocess.Popen(
        [sys.executable, "-c", prelude + code],
        cwd=REPO,
        env=child_env(**env),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
