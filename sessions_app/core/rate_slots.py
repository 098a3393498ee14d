"""A rate limit every worker counts in one cache, that a burst cannot slip through.

DRF's own throttle reads a key's history, decides, then writes the history back: two workers
(or two threads) reading at once both see room, and each writes its own copy, so a burst
spread over N workers gets up to N times the limit. Here a limit of `limit` per `duration`
is `limit` slot keys per throttle key, each claimed with the cache's atomic `add` (SET NX in
Redis) and expiring `duration` after its claim: a request is let through when it claims a
slot, so no more than `limit` are let through in any `duration`, whoever races whom. It is
DRF's sliding window exactly — a slot is free again when the request that claimed it is
older than `duration`.

Which slot to try first follows the clock: the window is cut into `limit` turns of
`duration / limit` seconds, and a request tries its turn's slot, which the request one
window earlier claimed — free when it has expired. So requests at most as frequent as the
rate cost one `add`; only when that slot is taken (a burst, or the limit spent) are all
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
    if cache.add(_slot(key, int(now * limit / duration) % limit), stamp, duration):
        return Claim(True)
    slots = [_slot(key, index) for index in range(limit)]
    held = cache.get_many(slots)
    for slot in slots:
        if slot not in held and cache.add(slot, stamp, duration):
            return Claim(True)
    if not held:
        # Every slot was claimed between the read and the adds: they are all brand new.
        return Claim(False, float(duration))
    oldest = min(held.values()) / 1000
    # Bounded both ways: a request that read the clock before a racing one claimed its slot
    # would otherwise be told a little more than `duration`.
    return Claim(False, min(max(oldest + duration - now, 0.0), float(duration)))


def _slot(key: str, index: int) -> str:
    return f"{key}:{index}"
