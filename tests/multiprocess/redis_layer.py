"""The Redis server the channel-layer tests use: one URL, and a skip when it cannot be reached.

TEST_REDIS_URL names it (default redis://127.0.0.1:6379/0); developers point it at a database
number of their own so that two suites running side by side never read each other's messages.
"""

import os

import pytest
import redis

TEST_REDIS_URL = os.environ.get("TEST_REDIS_URL", "redis://127.0.0.1:6379/0")


def _redis_unreachable_reason() -> str | None:
    try:
        client = redis.Redis.from_url(TEST_REDIS_URL, socket_connect_timeout=2, socket_timeout=2)
        try:
            client.ping()
        finally:
            client.close()
    except redis.RedisError as error:
        return f"Redis at {TEST_REDIS_URL} (TEST_REDIS_URL) is unreachable: {error}"
    return None


_unreachable = _redis_unreachable_reason()
requires_redis = pytest.mark.skipif(_unreachable is not None, reason=_unreachable or "")
