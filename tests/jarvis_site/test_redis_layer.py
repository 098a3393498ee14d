"""The Redis channel layer as the settings build it, for several workers (REDIS_URL).

channels_redis waits for messages with 5-second blocking pops; redis-py 8 gives up reading
after 5 seconds by default, so every idle WebSocket was closed with 1011 (server error)
after a few seconds. Every socket of a worker shares one inbox whose capacity was 100
messages: a few streaming turns filled it and their events were dropped. And redis-py 8 caps
a pool at 100 connections, fewer than a busy worker's layer uses at once.
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


BURST = """
import asyncio, django
django.setup()
from channels.layers import get_channel_layer

async def burst():
    layer = get_channel_layer()
    channels = [await layer.new_channel() for _ in range(3)]
    for index, channel in enumerate(channels):
        await layer.group_add(f"burst-{index}", channel)
    for number in range(150):
        for index in range(3):
            await layer.group_send(f"burst-{index}", {"type": "delta", "number": number})
    received = 0
    for channel in channels:
        for _ in range(150):
            await asyncio.wait_for(layer.receive(channel), 30)  # a guard only
            received += 1
    print(f"received {received}")
    await layer.flush()

asyncio.run(burst())
"""


CROWD = """
import asyncio, django
django.setup()
from channels.layers import get_channel_layer

async def crowd():
    layer = get_channel_layer()

    async def wait(number):
        try:
            await asyncio.wait_for(layer.receive(f"crowd-{number}"), 2)
        except asyncio.TimeoutError:
            return "waited"
        return "received"

    outcomes = await asyncio.gather(*(wait(n) for n in range(150)), return_exceptions=True)
    print(sorted({str(outcome) for outcome in outcomes}))

asyncio.run(crowd())
"""


def run_with_redis(code: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", code],
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


def redis_reachable() -> bool:
    try:
        redis.Redis.from_url(REDIS_URL, socket_connect_timeout=3).ping()
    except redis.RedisError:
        return False
    return True


pytestmark = pytest.mark.skipif(not redis_reachable(), reason=f"needs Redis at {REDIS_URL}")


def test_an_idle_receive_outlasts_the_layers_blocking_pop():
    done = run_with_redis(IDLE)
    assert done.returncode == 0, done.stderr
    assert "still waiting after 8 seconds" in done.stdout


def test_a_burst_of_events_for_several_sockets_of_one_worker_is_delivered_whole():
    done = run_with_redis(BURST)
    assert done.returncode == 0, done.stderr
    assert "received 450" in done.stdout


def test_a_hundred_and_fifty_waits_at_once_each_get_a_connection():
    done = run_with_redis(CROWD)
    assert done.returncode == 0, done.stderr
    assert "['waited']" in done.stdout, done.stdout
