import pytest

from sessions_app.store.db import DbSessionStore
from sessions_app.store.jsonl import JsonlSessionStore


@pytest.fixture
def make_store(backend, settings):
    """A factory, so a test can open a second store object as a restarted process would."""

    def make():
        if backend == "db":
            return DbSessionStore()
        return JsonlSessionStore(settings.SESSIONS_DIR)

    return make


@pytest.fixture
def store(make_store):
    return make_store()
