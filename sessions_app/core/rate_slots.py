"""A rate limit every worker counts in one cache, that a burst cannot slip through.

DRF's own throttle reads a key's history, decides, then writes the history back: two workers
(or two threads) reading at once both see room, and each writes its own copy, so a burst
spread over N workers gets up to N times the limit. Here a limit of `limit` per `duration`
is `limit` slot keys per throttle key, each claimed with the cache's atomic `add` (SET NX in
Redis) and expiring `duration` after its claim: a request is let through when it claims a
slot, so no more than `limit` are let through in any `duration`, whoever races whom. It is
DRF's sliding window exactly — a slot is free again when the request that claimed it is
older than `duration`.

Which slot to try is a hint kept in one more key, an atomic counter: slots are claimed in
turn, so the next one is the longest held and usually free when any is. Only when the hinted
slot is taken (the limit is spent, or a race or an expired counter moved the hint) are all
slots read at once, to find a free one or the time until the oldest frees.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Claim:
    allowed: bool
    # Seconds until a slot frees, when not allowed.
    wait: float = 0.0


def claim_slot(cache, key: str, *, limit: int, duration: int, now: float) -> Claim:
    """Count one request under `key` if fewer than `limit` were counted in the last
    `duration` seconds; else say how long until one more may be."""
    if limit < 1:
        return Claim(False, float(duration))
    stamp = int(now * 1000)  # an int: the Redis cache stores it as is, without pickling
    hinted = _next_hint(cache, key, duration) % limit
    if cache.add(_slot(key, hinted), stamp, duration):
        return Claim(True)
    slots = [_slot(key, index) for index in range(limit)]
    held = cache.get_many(slots)
    for index, slot in enumerate(slots):
        if slot not in held and cache.add(slot, stamp, duration):
            # The hint follows the slot just claimed; a race over it only costs a read.
            cache.set(_hint(key), index + 1, duration)
            return Claim(True)
    if not held:
        # Every slot was claimed between the read and the adds: they are all brand new.
        return Claim(False, float(duration))
    oldest_slot, oldest_stamp = min(held.items(), key=lambda item: item[1])
    # The next request tries the slot that frees first.
    cache.set(_hint(key), slots.index(oldest_slot), duration)
    # Bounded both ways: a request that read the clock before a racing one claimed its slot
    # would otherwise be told a little more than `duration`.
    return Claim(False, min(max(oldest_stamp / 1000 + duration - now, 0.0), float(duration)))


def _next_hint(cache, key: str, duration: int) -> int:
    """The slot to try first: each request gets the next one (an atomic increment). The
    counter expires like a slot, so a key nobody uses any more (an address that read a
    share once) leaves nothing behind; a counter that expires in use starts again at 0,
    which at worst costs the next request one read of every slot."""
    for _ in range(2):
        try:
            return cache.incr(_hint(key)) - 1
        except ValueError:  # no counter yet, or it expired
            if cache.add(_hint(key), 1, duration):
                return 0
    return 0  # it expired again between the add and the increment: any slot will do


def _slot(key: str, index: int) -> str:
    return f"{key}:{index}"


def _hint(key: str) -> str:
    return f"{key}:next"
