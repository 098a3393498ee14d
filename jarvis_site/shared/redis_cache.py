"""Django's Redis cache, with one redis-py client per connection pool instead of one per call.

Django's `RedisCacheClient` builds a `redis.Redis` for every command, and redis-py's
constructor fills a table of about 170 response callbacks each time: 0.2 ms of CPU per
command, more than the command's own round trip on loopback, paid by every throttle check
on the path of every prompt. A redis-py client takes a connection from its pool for each
command and may be shared between threads.
"""

from __future__ import annotations

from django.core.cache.backends.redis import RedisCache as DjangoRedisCache
from django.core.cache.backends.redis import RedisCacheClient


class _ClientPerPool(RedisCacheClient):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._clients: dict = {}

    def get_client(self, key=None, *, write=False):
        index = self._get_connection_pool_index(write)
        client = self._clients.get(index)
        if client is None:
            if index not in self._pools:
                self._pools[index] = self._pool_class.from_url(
                    self._servers[index], **self._pool_options
                )
            client = self._clients[index] = self._client(connection_pool=self._pools[index])
        return client


class RedisCache(DjangoRedisCache):
    def __init__(self, server, params):
        super().__init__(server, params)
        self._class = _ClientPerPool
