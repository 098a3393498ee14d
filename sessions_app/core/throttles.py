"""Rate limits per user, shared by every door that leads to the same cost.

Each is a scope of REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"], counted in Django's cache — on
Redis when REDIS_URL is set, so every worker spends from one budget (docs/design.md §12), in
slots claimed atomically (core/rate_slots.py), so a burst spread over workers gets no more:
- `turns` (TURN_THROTTLE_RATE): turns cost model calls — HTTP messages and WebSocket prompts;
- `branches` (BRANCH_THROTTLE_RATE): every branch is a new session holding a copy of a whole
  history — `POST …/branch/` and the `/branch` slash command (chat page and terminal);
- `search` (SEARCH_THROTTLE_RATE): a query ranks every matching message of the user;
- `exports` (EXPORT_THROTTLE_RATE): "download everything" reads and compresses all the user
  has — `GET /api/me/export/`;
- `uploads` (UPLOAD_THROTTLE_RATE): a file upload hashes, decodes (an image's header, a
  PDF's text) and stores up to UPLOAD_MAX_BYTES — `POST …/files/`.
- `shares` (SHARE_THROTTLE_RATE): share links made and refreshed, and shared conversations
  read — `/s/<token>` and `GET /api/shared/<token>/`, counted per address for a reader who
  is not signed in (DRF's user throttle does that by itself). A copy of a share is a new
  session holding a history, like a branch: it counts as one (`branches`).
- `files` (FILE_THROTTLE_RATE): a file read back and its thumbnail (made once, then kept) —
  `GET …/files/<id>/` and `…/thumb/`, the owner's and a share's (per address there).
- `imports` (IMPORT_THROTTLE_RATE): an import unpacks and parses up to IMPORT_MAX_BYTES of
  someone else's format — `POST /api/import/`.
"""

from __future__ import annotations

import logging
from types import SimpleNamespace

from redis.exceptions import RedisError
from rest_framework.throttling import UserRateThrottle

from sessions_app.core.rate_slots import claim_slot

logger = logging.getLogger(__name__)


class SharedRateThrottle(UserRateThrottle):
    """DRF's user throttle (the same keys, rates and sliding window), counted in slots."""

    _wait: float | None = None

    def allow_request(self, request, view) -> bool:
        if self.rate is None:
            return True
        self.key = self.get_cache_key(request, view)
        if self.key is None:
            return True
        try:
            claim = claim_slot(
                self.cache,
                self.key,
                limit=self.num_requests,
                duration=self.duration,
                now=self.timer(),
            )
        except RedisError as error:
            # A limit that cannot be counted does not stop the work it guards: while Redis
            # is away the person's request goes on (docs/design.md §12).
            logger.warning("throttle %s not counted, Redis unreachable: %s", self.scope, error)
            return True
        self._wait = claim.wait
        return claim.allowed

    def wait(self) -> float | None:
        return self._wait


class TurnRateThrottle(SharedRateThrottle):
    scope = "turns"


class BranchRateThrottle(SharedRateThrottle):
    scope = "branches"


class SearchRateThrottle(SharedRateThrottle):
    scope = "search"


class ExportRateThrottle(SharedRateThrottle):
    scope = "exports"


class UploadRateThrottle(SharedRateThrottle):
    scope = "uploads"


class ShareRateThrottle(SharedRateThrottle):
    scope = "shares"


class FileRateThrottle(SharedRateThrottle):
    scope = "files"


class ImportRateThrottle(SharedRateThrottle):
    scope = "imports"


def _wait(throttle: SharedRateThrottle, user) -> float | None:
    # DRF's user throttle reads only `request.user` (its pk) for an authenticated user.
    if throttle.allow_request(SimpleNamespace(user=user), None):
        return None
    return throttle.wait() or 1.0


def turn_throttle_wait(user) -> float | None:
    """None when `user` may start a turn now (and count it); else the seconds to wait."""
    return _wait(TurnRateThrottle(), user)


def branch_throttle_wait(user_id: int) -> float | None:
    """None when the user may branch a session now (and count it); else the seconds to wait."""
    return _wait(BranchRateThrottle(), SimpleNamespace(pk=user_id, is_authenticated=True))
