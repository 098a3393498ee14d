"""With REDIS_URL set, a socket's channel layer can wait longer than five seconds.

channels_redis waits for messages with 5-second blocking pops; redis-py 8 gives up reading
after 5 seconds by default, so every idle WebSocket was closed with 1011 (server error)
after a few seconds. The layer built from the settings must sit through an idle spell.
"""

import os
import subprocess
import sys

import pytest
import redis

from tests.helpers import REPO

REDIS_URL = os.environ.get("TEST_REDIS_URL", "redis://127.0.0.1:6379/0")

IDLE = """
import asyncio, django
django.setup()
from channels.layers import get_channel_layer

async def idle():
    layer = get_channel_layer()
    channel = await layer.new_channel()
    try:
        await asyncio.wait_for(layer.receive(channel), 8)
    except asyncio.TimeoutError:
        print("still waiting after 8 seconds")

asyncio.run(idle())
"""


def redis_reachable() -> bool:
    try:
        redis.Redis.from_url(REDIS_URL, socket_connect_timeout=3).ping()
    except redis.RedisError:
        return False
    return True


@pytest.mark.skipif(not redis_reachable(), reason=f"needs Redis at {REDIS_URL}")
def test_an_idle_receive_outlasts_the_layers_blocking_pop():
    done = subprocess.run(
        [sys.executable, "-c", IDLE],
        cwd=REPO,
        env={
            "PATH": "/usr/bin:/bin",
            "HOME": str(REPO / "var"),
            "DJANGO_SETTINGS_MODULE": "jarvis_site.settings",
            "REDIS_URL": REDIS_URL,
        },
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "still waiting after 8 seconds" in done.stdout
