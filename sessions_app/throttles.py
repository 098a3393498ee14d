"""The one rate limit on turns, shared by the HTTP API and the WebSocket.

Turns cost model calls: a user may start REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"]["turns"]
(TURN_THROTTLE_RATE) of them, whichever door they come through.
"""

from __future__ import annotations

from types import SimpleNamespace

from rest_framework.throttling import UserRateThrottle


class TurnRateThrottle(UserRateThrottle):
    scope = "turns"


def turn_throttle_wait(user) -> float | None:
    """None when `user` may start a turn now (and count it); else the seconds to wait."""
    throttle = TurnRateThrottle()
    # DRF's throttle reads only `request.user` for an authenticated user.
    if throttle.allow_request(SimpleNamespace(user=user), None):
        return None
    return throttle.wait() or 1.0
