"""The channel layer of a single worker (no REDIS_URL): Channels' in-memory layer, made
cheap enough for hundreds of sockets.

Two costs of `channels.layers.InMemoryChannelLayer` grow with the number of sockets, and at a
few hundred streaming turns they took a third of the worker's event loop:
- it walks every channel's queue and every group's members to drop expired messages on each
  `receive` and each `group_send`. Messages expire after a minute and memberships after a
  day, so walking at most once a second changes nothing anyone can see;
- it `deepcopy`s a message for every member of the group. Each receiver must still get a copy
  of its own (as through Redis, where every message is serialized): the message is pickled
  once per send and unpickled per receiver, three times cheaper than a deep copy, and without
  a task per receiver.
"""

import asyncio
import pickle
import time

from channels.exceptions import ChannelFull
from channels.layers import InMemoryChannelLayer

from jarvis_site.shared.metrics import EVENTS_DROPPED

CLEAN_EVERY_SEC = 1.0


class InProcessChannelLayer(InMemoryChannelLayer):
    _cleaned_at = 0.0

    def _clean_expired(self):
        now = time.monotonic()
        if now - self._cleaned_at >= CLEAN_EVERY_SEC:
            self._cleaned_at = now
            super()._clean_expired()

    async def send(self, channel, message):
        assert isinstance(message, dict), "message is not a dict"
        self.require_valid_channel_name(channel)
        assert "__asgi_channel__" not in message
        self._put(channel, pickle.loads(_packed(message)))

    async def group_send(self, group, message):
        assert isinstance(message, dict), "message is not a dict"
        self.require_valid_group_name(group)
        self._clean_expired()
        packed = _packed(message)
        for channel in list(self.groups.get(group, ())):
            try:
                self._put(channel, pickle.loads(packed))
            except ChannelFull:
                # As Channels does: a full inbox loses this message, the others get it.
                EVENTS_DROPPED.inc()

    def _put(self, channel: str, message: dict) -> None:
        queue = self.channels.setdefault(channel, asyncio.Queue(maxsize=self.get_capacity(channel)))
        try:
            queue.put_nowait((time.time() + self.expiry, message))
        except asyncio.QueueFull:
            raise ChannelFull(channel) from None


def _packed(message: dict) -> bytes:
    return pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
