"""The channel layer on Redis, waiting through an outage (docs/design.md §32).

Every socket of a worker receives through one wait on Redis (channels-redis's BRPOP of the
process's channel). Redis going away made that wait raise in the consumer whose turn it was to
read, and a consumer whose receive raises is closed: every socket of the worker went with it,
although the turns they watched were running right beside them. Here the read waits instead,
trying again every RETRY_SEC until Redis answers; the sockets stay open, get their own turns'
events meanwhile (those do not pass through the layer), and what others send them through the
layer arrives once it is back. What was sent to them while it was away is lost, as Redis lost it.

Once Redis is back, every connection the pool kept from before is dead, and the first command
on each fails ("Connection closed by server"), after which it connects again. A socket opening
then met one and was refused, and one after the other until each had failed once: so a
command that fails for that reason is tried again at once, for up to STALE_RETRY_SEC, before
the failure counts (Redis really away: the caller refuses the socket, 4503).
"""

from __future__ import annotations

import asyncio
import logging

from channels_redis.core import RedisChannelLayer

from jarvis_site.shared.outages import redis_away

logger = logging.getLogger(__name__)

RETRY_SEC = 0.25
STALE_RETRY_SEC = 1.0


class OutlastingRedisChannelLayer(RedisChannelLayer):
    async def receive_single(self, channel):
        away = False
        while True:
            try:
                received = await super().receive_single(channel)
            except Exception as error:
                if not redis_away(error):
                    raise
                if not away:
                    away = True
                    logger.warning("channel layer: Redis is away; its sockets stay open")
                await asyncio.sleep(RETRY_SEC)
                continue
            if away:
                logger.warning("channel layer: Redis is back")
            return received

    async def send(self, channel, message):
        return await _outlasting_stale(super().send, channel, message)

    async def group_add(self, group, channel):
        return await _outlasting_stale(super().group_add, group, channel)

    async def group_discard(self, group, channel):
        return await _outlasting_stale(super().group_discard, group, channel)

    async def group_send(self, group, message):
        return await _outlasting_stale(super().group_send, group, message)


async def _outlasting_stale(command, *args):
    deadline = asyncio.get_running_loop().time() + STALE_RETRY_SEC
    while True:
        try:
            return await command(*args)
        except Exception as error:
            if not redis_away(error) or asyncio.get_running_loop().time() >= deadline:
                raise
            await asyncio.sleep(0)  # the failed connection was dropped: the next is tried
