"""Fixtures shared by the whole suite."""

import pytest
from django.conf import settings
from django.core.cache import cache

from sessions_app.store import get_store


def on_postgres() -> bool:
    return settings.DATABASE_VENDOR == "postgresql"


requires_postgres = pytest.mark.skipif(
    not on_postgres(), reason="needs DATABASE_URL pointing at PostgreSQL"
)


@pytest.fixture(autouse=True)
def _fresh_throttle():
    # Throttle counters live in the cache; one test must not spend another's budget.
    cache.clear()
    yield
    cache.clear()


@pytest.fixture(autouse=True)
def _isolated_files(tmp_path, settings):
    """Every test gets its own jsonl and export directories, and a fresh store object."""
    settings.SESSIONS_DIR = tmp_path / "sessions"
    settings.EXPORTS_DIR = tmp_path / "exports"
    # No heartbeat thread in the test process itself; the servers tests start keep theirs.
    settings.WORKER_HEARTBEAT = False
    get_store.cache_clear()
    yield
    get_store.cache_clear()


@pytest.fixture(params=["db", "jsonl"])
def backend(request, settings):
    """Run a test once per session store backend (db on the configured database, jsonl)."""
    settings.JARVIS_SESSION__PERSISTENCE_BACKEND = request.param
    get_store.cache_clear()
    return request.param
