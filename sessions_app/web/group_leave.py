"""A closed socket leaves its group a few at a time per worker.

A socket that closes leaves its group (with Redis, one command). Each command the Redis layer
sends takes a connection from its pool, and a pool with none free opens one: a hundred
sockets closing at once opened a hundred connections, each a TCP connect and a handshake of
commands on the worker's event loop, 5% of that loop in a two-worker storm
(docs/performance.md). Nobody waits for a closed socket's leaving, so LEAVES_AT_ONCE of them
go at a time, on the connections the pool has; the rest wait their turn without a
connection. Joining is not held back: a socket that opens waits for its join.
"""

from __future__ import annotations

import asyncio
import weakref

LEAVES_AT_ONCE = 4

_gates: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Semaphore] = (
    weakref.WeakKeyDictionary()
)


async def group_leave(layer, group: str, channel: str) -> None:
    """`layer.group_discard(group, channel)`, at most LEAVES_AT_ONCE at a time on this loop."""
    loop = asyncio.get_running_loop()
    gate = _gates.get(loop)
    if gate is None:
        gate = _gates[loop] = asyncio.Semaphore(LEAVES_AT_ONCE)
    async with gate:
        await layer.group_discard(group, channel)
