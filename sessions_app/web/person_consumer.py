"""`/ws/me/`: one socket per tab that keeps the person's sessions list live (docs/design.md
§24). It joins the person's channel-layer group and passes on each `session_changed` frame
(sessions_app.services.session_events), from whichever worker made the change. It takes no
frames: a tab that (re)connects reads the list over HTTP, then follows the frames.

Origin and authentication are those of the session sockets: the origin check wraps every
WebSocket route (jarvis_site.asgi), and a handshake without a signed-in user or a valid token
is closed with 4401. A person's group is named by their user id only, so nobody else's
changes can reach it.
"""

from __future__ import annotations

from channels.generic.websocket import AsyncJsonWebsocketConsumer

from jarvis_site.shared.errors import Code
from sessions_app.runtime.loop import drain, server_loop
from sessions_app.services.session_events import person_group
from sessions_app.web.consumers import CLOSE_SERVICE_RESTART, CLOSE_UNAUTHENTICATED
from sessions_app.web.group_leave import group_leave


class PersonConsumer(AsyncJsonWebsocketConsumer):
    group: str | None = None

    async def connect(self):
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            return await self._refuse(CLOSE_UNAUTHENTICATED)
        if drain.is_draining():
            return await self._refuse(CLOSE_SERVICE_RESTART)
        server_loop.serve_on_this_loop()  # sends from synchronous code leave from here
        # Joined before the handshake completes: a change made once the tab is connected
        # is never missed.
        self.group = person_group(user.id)
        await self.channel_layer.group_add(self.group, self.channel_name)
        drain.socket_register(self)
        await self.accept()

    async def _refuse(self, code: int):
        # Accept first: a close before the handshake completes reaches the client as a bare
        # HTTP 403, without the code that says why.
        await self.accept()
        await self.close(code=code)

    async def disconnect(self, code):
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
