"""Fixtures shared by the whole suite: isolation of every test, the store backends, and two
users (alice, bob) with their API tokens and token clients.

The user fixtures ask for `db`; a test marked `django_db(transaction=True)` gets them in a
transactional database all the same (the mark decides), which threads and servers need.
"""

import os
import threading

import pytest
import redis
from django.conf import settings
from django.core.cache import cache

from sessions_app.store import get_store
from sessions_app.store.request_headers import headers_forget_known
from tests.builders import make_user, token_client, token_of
from tests.helpers import GUARD_SEC
from tests.parallel import redis_url_of_worker

# Each xdist worker gets a Redis database of its own (tests/parallel.py). Set before any test
# module is imported: they read TEST_REDIS_URL when they load.
os.environ["TEST_REDIS_URL"] = redis_url_of_worker(
    os.environ.get("TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
)

# A pool thread closes its database connection as soon as its pool runs out of work, here
# and in the servers tests start: a test database is dropped at the end of the run, and a
# connection kept for POOL_IDLE_CLOSE_SEC would hold it. tests/sessions_app/runtime/
# test_pool_connections.py tests the keeping itself.
os.environ.setdefault("POOL_IDLE_CLOSE_SEC", "0")
settings.POOL_IDLE_CLOSE_SEC = float(os.environ["POOL_IDLE_CLOSE_SEC"])


# Folders and modules whose tests start servers, browsers or other processes, and take
# seconds each (`make test PYTEST_ARGS=--durations=40` lists them).
SLOW_FIRST = (
    "tests/scripts/test_session_race.py",
    "tests/browser/",
    "tests/multiprocess/",
    "tests/scripts/",
    "tests/sessions_app/management/",
    "tests/jarvis_site/test_settings.py",
    "tests/jarvis_site/test_redis_layer.py",
    "tests/sessions_app/files/test_s3_storage.py",
    "tests/sessions_app/files/test_attachments.py",
    "tests/sessions_app/runtime/test_multiprocess.py",
    "tests/notices_app/schedules/test_restart.py",
    "tests/memory_app/test_consolidation.py",
    "tests/memory_app/test_working_memory.py",
)


def pytest_collection_modifyitems(config, items):
    """SLOW_FIRST first, in its order, each test's order otherwise kept. `make test` hands
    tests out in this order (xdist's `--dist load`): the long ones then run beside each other
    at the start, and the run does not end with one of them going on alone on a worker while
    the others wait."""
    items.sort(
        key=lambda item: next(
            (rank for rank, prefix in enumerate(SLOW_FIRST) if item.nodeid.startswith(prefix)),
            len(SLOW_FIRST),
        )
    )


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_teardown(item, nextitem):
    """Before a test's fixtures are torn down, the prompts it queued have finished running.

    Outside a server, a queued prompt runs in a thread of its own (`queue-run`,
    services.prompt_modes), and a test that waits for the answer may end while that thread
    still releases the lease and looks for what waits next. Its last statements then met the
    database flush of the test's teardown: on PostgreSQL a deadlock with the flush's
    TRUNCATE, and the next test found the last one's users still there."""
    for thread in threading.enumerate():
        if thread.name == "queue-run":
            thread.join(GUARD_SEC)


def on_postgres() -> bool:
    return settings.DATABASE_VENDOR == "postgresql"


requires_postgres = pytest.mark.skipif(
    not on_postgres(), reason="needs DATABASE_URL pointing at PostgreSQL"
)


def _forget_cached_in_redis() -> None:
    """Delete the Django cache's keys (the throttles' counts) in this worker's Redis database,
    where the servers a test starts with REDIS_URL keep them: the next test's servers must
    not spend from these budgets, which the same user ids would meet. Only the cache's keys:
    the channel layer's are the tests' own business."""
    client = redis.Redis.from_url(
        os.environ["TEST_REDIS_URL"], socket_connect_timeout=2, socket_timeout=2
    )
    try:
        keys = list(client.scan_iter(match=f"{settings.CACHE_KEY_PREFIX}:*", count=1000))
        if keys:
            client.delete(*keys)
    except redis.ConnectionError:
        pass  # no Redis: the tests that need one are skipped, and it holds nothing
    finally:
        client.close()


@pytest.fixture(autouse=True)
def _fresh_throttle():
    # Throttle counters live in the cache; one test must not spend another's budget.
    cache.clear()
    _forget_cached_in_redis()
    yield
    cache.clear()


@pytest.fixture(autouse=True)
def _isolated_files(tmp_path, settings):
    """Every test gets its own jsonl and export directories, and a fresh store object."""
    settings.SESSIONS_DIR = tmp_path / "sessions"
    settings.EXPORTS_DIR = tmp_path / "exports"
    # Uploaded files' bytes too (docs/design.md §23); Django drops its cached storages.
    settings.STORAGES = {
        **settings.STORAGES,
        "blobs": {**settings.STORAGES["blobs"], "OPTIONS": {"location": str(tmp_path / "blobs")}},
    }
    # No heartbeat thread in the test process itself; the servers tests start keep theirs.
    settings.WORKER_HEARTBEAT = False
    get_store.cache_clear()
    # Tables are emptied between tests, which a real database never does to headers.
    headers_forget_known()
    yield
    get_store.cache_clear()
    headers_forget_known()


@pytest.fixture(params=["db", "jsonl"])
def backend(request, settings):
    """Run a test once per session store backend (db on the configured database, jsonl)."""
    settings.JARVIS_SESSION__PERSISTENCE_BACKEND = request.param
    get_store.cache_clear()
    return request.param


@pytest.fixture
def alice(db):
    return make_user("alice")


@pytest.fixture
def bob(db):
    return make_user("bob")


@pytest.fixture
def alice_token(alice) -> str:
    return token_of(alice)


@pytest.fixture
def bob_token(bob) -> str:
    return token_of(bob)


@pytest.fixture
def api(alice):
    """Alice's token client: the API as a program calling it on her behalf sees it."""
    return token_client(alice)


@pytest.fixture
def bob_api(bob):
    return token_client(bob)
