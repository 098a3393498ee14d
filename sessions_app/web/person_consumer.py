"""`/ws/me/`: one socket per tab that keeps the person's sessions list live (docs/design.md
§24). It joins the person's channel-layer group and passes on each `session_changed` frame
(sessions_app.services.session_events), from whichever worker made the change. It takes no
frames: a tab that (re)connects reads the list over HTTP, then follows the frames.

Origin and authentication are those of the session sockets: the origin check wraps every
WebSocket route (jarvis_site.asgi), and a handshake without a signed-in user or a valid token
is closed with 4401. A person's group is named by their user id only, so nobody else's
changes can reach it.

A person holds at most MAX_PERSON_SOCKETS_PER_USER of these on one worker (counted in the
worker: each socket is one worker's); one more is closed with 4429.
"""

from __future__ import annotations

from collections import Counter

from channels.generic.websocket import AsyncJsonWebsocketConsumer
from django.conf import settings

from jarvis_site.shared.errors import Code
from sessions_app.runtime.loop import drain, server_loop
from sessions_app.services.session_events import person_group
from sessions_app.web.consumers import CLOSE_SERVICE_RESTART, CLOSE_UNAUTHENTICATED
from sessions_app.web.group_leave import group_leave

CLOSE_TOO_MANY_SOCKETS = 4429
# Open `/ws/me/` sockets of each person on this worker. Only the event loop's thread touches
# it (connect and disconnect run there), so no lock.
_open_by_user: Counter[int] = Counter()


class PersonConsumer(AsyncJsonWebsocketConsumer):
    group: str | None = None
    counted_for: int | None = None

    async def connect(self):
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            return await self._refuse(CLOSE_UNAUTHENTICATED)
        if drain.is_draining():
            return await self._refuse(CLOSE_SERVICE_RESTART)
        if _open_by_user[user.id] >= settings.MAX_PERSON_SOCKETS_PER_USER:
            return await self._refuse(CLOSE_TOO_MANY_SOCKETS)
        _open_by_user[user.id] += 1
        self.counted_for = user.id
        server_loop.serve_on_this_loop()  # sends from synchronous code leave from here
        # Joined before the handshake completes: a change made once the tab is connected
        # is never missed.
        self.group = person_group(user.id)
        try:
            await self.channel_layer.group_add(self.group, self.channel_name)
        except BaseException:
            # A consumer whose connect raised is never told of its disconnect.
            self._uncount()
            raise
        drain.socket_register(self)
        await self.accept()

    async def _refuse(self, code: int):
        # Accept first: a close before the handshake completes reaches the client as a bare
        # HTTP 403, without the code that says why.
        await self.accept()
        await self.close(code=code)

    def _uncount(self) -> None:
        if self.counted_for is not None:
            _open_by_user[self.counted_for] -= 1
            if _open_by_user[self.counted_for] <= 0:
                del _open_by_user[self.counted_for]
            self.counted_for = None

    async def disconnect(self, code):
        self._uncount()
        drain.socket_unregister(self)
        if self.group is not None:
            await group_leave(self.channel_layer, self.group, self.channel_name)
            self.group = None

    async def receive_json(self, content, **kwargs):
        await self.send_json(
            {"type": "error", "code": Code.BAD_REQUEST, "message": "this socket takes no frames"}
        )

    async def person_event(self, message):
        await self.send_json(message["event"])

    async def drain_close(self):
        """Close with 1012 (the worker restarts): the tab reconnects to another worker."""
        await self.channel_layer.send(self.channel_name, {"type": "drain.closing"})

    async def drain_closing(self, message):
        await self.close(code=CLOSE_SERVICE_RESTART)
