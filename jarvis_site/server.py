"""Daphne, with a drain on SIGTERM (docs/design.md §19): the server `manage.py serve` runs.

Plain `daphne` stops on SIGTERM at once: Twisted's handler stops the reactor and Daphne
cancels every connection's application, so a running turn dies mid-call (its session is
repaired as `interrupted` on next use) and sockets drop without a close code. This server
installs its own SIGTERM and SIGINT handlers once the reactor runs (Twisted's are never
installed) and drains instead:

1. at once: `/readyz` answers 503 and no new turn starts here (runtime.loop.drain);
2. every socket closes with 1012 as soon as its session has no turn running here, after
   that turn's `agent_end`; the page reconnects, through the proxy, to another worker;
3. the running turns get DRAIN_TIMEOUT_SEC to end; then they are aborted and close as any
   aborted turn does (every call answered, `turn_end` aborted);
4. it stops listening, so that the proxy sends new connections to the other workers at once
   (until then /readyz says 503 to whoever asks); once the sockets and the answers under way
   are done (or CLOSE_GRACE_SEC passed), the reactor stops and the process exits 0.

A second signal during the drain ends the grace period at once (step 3).

Its HTTP requests are jarvis_site.request_bodies': a body over the cap for its path is
refused before it is read, and form bodies are never parsed by the HTTP server itself.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal

from daphne.cli import CommandLineInterface
from daphne.server import Server
from daphne.ws_protocol import WebSocketProtocol
from django.conf import settings
from twisted.internet import reactor

from jarvis_site.request_bodies import BoundedHTTPFactory
from jarvis_site.shared.metrics import process_gone
from sessions_app.runtime.loop import drain
from sessions_app.runtime.sandbox.registry import sandbox_status
from sessions_app.runtime.turn.turns import turns_abort_all_local

logger = logging.getLogger(__name__)

# After the turns ended: how long sockets have to complete their closing handshake, and HTTP
# requests (a turn's POST among them) to send their answer.
CLOSE_GRACE_SEC = 10
ASGI_APPLICATION = "jarvis_site.asgi:application"
SERVICE_RESTART = 1012


class RestartingWebSocketProtocol(WebSocketProtocol):
    """Daphne's WebSocket protocol, able to close with 1012 (Service Restart).

    1012 is a registered close code meant for exactly this, but autobahn's `sendClose` takes
    only 1000 and 3000-4999 from an application; the frame it sends for them is the same.
    """

    def serverClose(self, code=None):
        if code == SERVICE_RESTART:
            self.sendCloseFrame(code=code, isReply=False)
        else:
            super().serverClose(code)


class DrainingServer(Server):
    # Daphne's run() makes its HTTP factory and listens with it straight away, with no hook
    # in between: the factory is swapped for ours as run() stores it.
    @property
    def http_factory(self):
        return self._http_factory

    @http_factory.setter
    def http_factory(self, daphne_factory):
        self._http_factory = BoundedHTTPFactory(self)

    def run(self):
        # Twisted would install handlers that stop the reactor; ours drain first.
        self.signal_handlers = False
        self._hurry = asyncio.Event()
        self._drain_task: asyncio.Task | None = None  # held: the loop keeps weak references
        self._ports = []
        reactor.callWhenRunning(self._on_start)
        super().run()

    def listen_success(self, port):
        self._ports.append(port)
        super().listen_success(port)

    def _on_start(self) -> None:
        self.ws_factory.protocol = RestartingWebSocketProtocol
        # autobahn fails a connection by dropping TCP unless told otherwise: an inbound
        # message over Daphne's 1 MiB cap then ended the socket with no close code (1006),
        # and the page could not say why. Failed this way, it closes with 1009 and a reason.
        # setProtocolOptions also resets allowNullOrigin to False, and autobahn then refused
        # `Origin: null` itself with a 400; the origin check (sessions_app.web.origins)
        # refuses it as any other origin, with a 403.
        self.ws_factory.setProtocolOptions(failByDrop=False, allowNullOrigin=True)
        loop = asyncio.get_event_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, self._on_signal, signum)

    def _on_signal(self, signum: int) -> None:
        name = signal.Signals(signum).name
        if drain.drain_begin():
            logger.info(
                "%s: draining (%d turns running, %d sockets open)",
                name,
                drain.turns_running(),
                len(drain.sockets_open()),
            )
            self._drain_task = asyncio.ensure_future(self._drain())
        else:
            logger.warning("%s again: aborting the running turns now", name)
            self._hurry.set()

    async def _drain(self) -> None:
        loop = asyncio.get_running_loop()
        closing: dict = {}

        def close_sockets() -> None:
            # Also a socket that finished its handshake just as the drain began.
            for socket in drain.sockets_open():
                if socket not in closing:
                    closing[socket] = asyncio.ensure_future(socket.drain_close())

        close_sockets()
        if not await self._turns_end_within(settings.DRAIN_TIMEOUT_SEC):
            aborted = turns_abort_all_local()
            logger.warning("drain: grace period over, %d turns aborted", aborted)
            await drain.turns_done(timeout=CLOSE_GRACE_SEC)
        for port in self._ports:
            port.stopListening()
        deadline = loop.time() + CLOSE_GRACE_SEC
        while drain.sockets_open() or self._answers_under_way():
            if loop.time() >= deadline:
                logger.warning(
                    "drain: %d sockets and other connections still open after %d s; stopping",
                    len(drain.sockets_open()),
                    CLOSE_GRACE_SEC,
                )
                break
            close_sockets()
            await asyncio.sleep(drain.DRAIN_POLL_SEC)
        logger.info("drain: done, stopping")
        self.stop()

    async def _turns_end_within(self, timeout: float) -> bool:
        ended = asyncio.ensure_future(drain.turns_done(timeout=timeout))
        hurried = asyncio.ensure_future(self._hurry.wait())
        await asyncio.wait([ended, hurried], return_when=asyncio.FIRST_COMPLETED)
        if not ended.done():
            ended.cancel()
            return False
        hurried.cancel()
        return ended.result()

    def _answers_under_way(self) -> bool:
        """A connection still open whose application is still running: an HTTP answer not
        yet sent, a socket not yet closed. (Once its connection is gone, an application may
        take seconds more to end — a Redis layer's receive finishes its blocking pop — and
        nobody waits for it.)"""
        return any(
            "disconnected" not in details
            and details.get("application_instance") is not None
            and not details["application_instance"].done()
            for details in self.connections.values()
        )


class DrainingCommandLine(CommandLineInterface):
    server_class = DrainingServer


def serve(daphne_args: list[str]) -> None:
    """Run Daphne's command line (its options, then the application) until drained."""
    # The sandbox's start probe (docs/design.md §28) before the first turn would pay it; a
    # sandbox that does not isolate is logged, and /readyz says why.
    sandbox_status()
    try:
        DrainingCommandLine().run([*daphne_args, ASGI_APPLICATION])
    finally:
        # This process's open sockets leave jarvis_ws_connections; its counters stay.
        process_gone(os.getpid())
