"""Sockets that close at once leave their groups through the Redis connections the worker
has, not a new connection each (sessions_app.web.group_leave)."""

import asyncio
import uuid

import pytest
from channels_redis.core import RedisChannelLayer

from sessions_app.web.group_leave import LEAVES_AT_ONCE, group_leave
from tests.helpers import GUARD_SEC
from tests.multiprocess.redis_layer import TEST_REDIS_URL, requires_redis

pytestmark = [pytest.mark.anyio, requires_redis]

SOCKETS = 100


def pool_size(layer: RedisChannelLayer, group: str) -> int:
    """The connections the layer's pool for `group` holds, in use or not."""
    pool = layer.connection(layer.consistent_hash(group)).connection_pool
    return len(pool._available_connections) + len(pool._in_use_connections)


async def test_a_hundred_sockets_closing_at_once_leave_on_a_few_connections():
    layer = RedisChannelLayer(hosts=[TEST_REDIS_URL])
    group = f"leave-{uuid.uuid4().hex[:8]}"
    channels = [await layer.new_channel() for _ in range(SOCKETS)]
    try:
        for channel in channels:  # one after another: one connection
            await layer.group_add(group, channel)
        before = pool_size(layer, group)
        async with asyncio.timeout(GUARD_SEC):
            await asyncio.gather(*(group_leave(layer, group, c) for c in channels))
        assert pool_size(layer, group) <= max(before, LEAVES_AT_ONCE)
        # Every socket left: the group's member set (the layer's own key) is empty.
        members = layer.connection(layer.consistent_hash(group))
        assert await members.zcard(layer._group_key(group)) == 0
    finally:
        await layer.close_pools()


async def test_leaving_all_at_once_without_the_bound_opens_a_connection_each():
    # What the bound saves: the layer's own discards, all at once.
    layer = RedisChannelLayer(hosts=[TEST_REDIS_URL])
    group = f"leave-{uuid.uuid4().hex[:8]}"
    channels = [await layer.new_channel() for _ in range(SOCKETS)]
    try:
        for channel in channels:
            await layer.group_add(group, channel)
        async with asyncio.timeout(GUARD_SEC):
            await asyncio.gather(*(layer.group_discard(group, c) for c in channels))
        assert pool_size(layer, group) > LEAVES_AT_ONCE
    finally:
        await layer.close_pools()
