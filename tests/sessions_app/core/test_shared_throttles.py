"""Rate limits counted in one cache for every worker (docs/design.md §12): a burst that
reaches the cache at once gets exactly the limit, and a cache that cannot be reached does not
stop anyone's work."""

import logging
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
from django.core.cache import cache

from sessions_app.core.throttles import TurnRateThrottle, turn_throttle_wait
from tests.helpers import GUARD_SEC
from tests.multiprocess.redis_layer import TEST_REDIS_URL, requires_redis
from tests.multiprocess.servers import free_port

pytestmark = pytest.mark.django_db

BURST = 50


def redis_cache(url: str, prefix: str) -> dict:
    return {
        "default": {
            "BACKEND": "jarvis_site.shared.redis_cache.RedisCache",
            "LOCATION": url,
            "KEY_PREFIX": prefix,
            "OPTIONS": {"socket_timeout": 0.5, "socket_connect_timeout": 0.5},
        }
    }


@pytest.fixture
def five_turns_a_minute(monkeypatch):
    # DRF reads the rates from settings when it loads; this stands for TURN_THROTTLE_RATE=5/min.
    monkeypatch.setattr(TurnRateThrottle, "THROTTLE_RATES", {"turns": "5/min"})


@requires_redis
def test_fifty_prompts_reaching_redis_at_once_start_exactly_five(
    settings, alice, five_turns_a_minute
):
    # The prefix the suite's fixtures clear between tests (tests/conftest.py).
    settings.CACHES = redis_cache(TEST_REDIS_URL, settings.CACHE_KEY_PREFIX)
    all_at_once = threading.Barrier(BURST)

    def prompt(_):
        cache.get("connected")  # each thread's own connection, open before the burst
        all_at_once.wait(GUARD_SEC)
        return turn_throttle_wait(alice)

    with ThreadPoolExecutor(BURST) as pool:
        waits = list(pool.map(prompt, range(BURST)))

    assert waits.count(None) == 5
    # The refused are told to come back when the oldest of the five is a minute old.
    assert all(55 < wait <= 60 for wait in waits if wait is not None)


def test_prompts_go_on_while_the_cache_s_redis_is_away(
    settings, alice, five_turns_a_minute, caplog
):
    settings.CACHES = redis_cache(f"redis://127.0.0.1:{free_port()}/0", "nowhere")

    with caplog.at_level(logging.WARNING, logger="sessions_app.core.throttles"):
        waits = [turn_throttle_wait(alice) for _ in range(7)]

    assert waits == [None] * 7
    assert "Redis unreachable" in caplog.text


def test_the_embedded_servers_own_memory_counts_the_same_window(alice, five_turns_a_minute):
    waits = [turn_throttle_wait(alice) for _ in range(7)]

    assert waits[:5] == [None] * 5
    assert all(55 < wait <= 60 for wait in waits[5:])
