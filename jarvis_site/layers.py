"""The in-process channel layer of a single worker (no REDIS_URL), with its cleanup paced.

Channels' InMemoryChannelLayer walks every channel's queue and every group's members to drop
expired messages on each `receive` and each `group_send`. Every open socket waits in a
`receive`, and every turn event is a `group_send`, so at a few hundred sockets a worker spent
a tenth of its event loop on that walk. Messages expire after a minute and memberships after
a day: walking at most once a second changes nothing anyone can see.
"""

import time

from channels.layers import InMemoryChannelLayer

CLEAN_EVERY_SEC = 1.0


class PacedInMemoryChannelLayer(InMemoryChannelLayer):
    _cleaned_at = 0.0

    def _clean_expired(self):
        now = time.monotonic()
        if now - self._cleaned_at >= CLEAN_EVERY_SEC:
            self._cleaned_at = now
            super()._clean_expired()
