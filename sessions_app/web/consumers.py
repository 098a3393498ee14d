"""The WebSocket of a session (docs/design.md §8): a thin adapter between frames and services.

Every connection of a session joins its worker's list of the session's sockets, which the
running turn's events reach directly or through the live bus (sessions_app.runtime.live.live, §17), and
the session's channel-layer group, where notices and changes made outside a turn arrive; so
two tabs (in any worker process) show the same conversation as it happens.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import logging
import math
import time
from urllib.parse import parse_qs

from asgiref.sync import sync_to_async
from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer, AsyncWebsocketConsumer
from channels.layers import InMemoryChannelLayer
from django.conf import settings
from django.db import connections

from jarvis_site.shared import metrics
from jarvis_site.shared.errors import Code, DomainError, detail_of
from jarvis_site.shared.log_context import log_context_set, new_request_id
from jarvis_site.shared.outages import database_away, redis_away
from sessions_app import selectors
from sessions_app.core import frames, limits
from sessions_app.core.ids import InvalidSessionId, group_name, validate_session_id
from sessions_app.core.throttles import turn_throttle_wait
from sessions_app.runtime.live import live
from sessions_app.runtime.loop import drain, loop_lag, server_loop
from sessions_app.runtime.loop.beside import first_call_beside
from sessions_app.runtime.loop.eager import AT_ONCE, Spacing, start_task
from sessions_app.runtime.loop.executors import in_pool
from sessions_app.runtime.loop.socket_writes import SEND_TEXT_NOW, WRITE_NOW
from sessions_app.runtime.turn.agents import UnknownAgent
from sessions_app.services import approvals, notices, prompt_modes, turns
from sessions_app.services import connections as connection_services
from sessions_app.store import SessionNotFound
from sessions_app.web import commands
from sessions_app.web.frame_lane import FrameLane, frame_lane_install
from sessions_app.web.group_leave import group_leave
from sessions_app.web.notice_watch import notices_unwatch, notices_watch

logger = logging.getLogger(__name__)

CLOSE_BAD_ID = 4400
CLOSE_UNAUTHENTICATED = 4401
CLOSE_NOT_FOUND = 4404
# The registry lost this connection (its heartbeat lapsed and it was swept): the client should
# reconnect, which registers it again — or opens a new session if this one was deleted.
CLOSE_EXPIRED = 4408
# `?agent=` names another agent than the existing session's (the API's 409 agent_mismatch).
CLOSE_AGENT_MISMATCH = 4409
# An inbound frame over WEBSOCKET_MESSAGE_MAX_BYTES (RFC 6455's "message too big").
CLOSE_TOO_LARGE = 1009
# The worker is restarting (drain, docs/design.md §19): the client reconnects, and the proxy
# sends it to another worker.
CLOSE_SERVICE_RESTART = 1012
# Redis or the database is away (docs/design.md §32): the socket cannot be opened now, and
# the page tries again with its backoff, as after any close it does not know to be final.
# The HTTP status's number, as 4404 is (1013, "try again later", is refused by Daphne).
CLOSE_TRY_AGAIN_LATER = 4503
# A received frame this long is parsed and checked in the `sockets` pool, not on the event
# loop: the checks are linear, but a megabyte still takes tens of milliseconds of CPU, which
# on the loop every other socket and turn of the worker would wait through (§27).
PARSE_IN_POOL_CHARS = 64 * 1024
# A prompt's turn takes its first step as its frame is read, at most once per this interval
# on a worker; the rest of a burst waits its pass of the event loop.
START_AT_ONCE_EVERY_SEC = 0.05
_STARTS_AT_ONCE = Spacing(START_AT_ONCE_EVERY_SEC)


def frame_checked(text_data: str | None) -> tuple[dict | None, tuple[str, str] | None]:
    """A received frame parsed and checked: (the frame, None), or (None, (code, message)) for
    the error the client gets. Every check is linear in the frame (docs/design.md §27)."""
    try:
        frame = limits.json_loads(text_data) if text_data is not None else None
    except limits.JsonTooDeep as error:
        return None, (Code.BAD_REQUEST, str(error))
    except ValueError:
        frame = None
    if not isinstance(frame, dict) or not isinstance(frame.get("type"), str):
        return None, (Code.BAD_REQUEST, 'a frame is a JSON object with a "type"')
    try:
        if frame["type"] == "prompt" and isinstance(frame.get("text"), str):
            # The API's check of a prompt, with its words, then every string of the frame:
            # what no store can keep is refused before anything runs.
            limits.prompt_check(frame["text"])
        limits.strings_check(frame, name="the frame")
    except limits.InputInvalid as error:
        return None, (Code.INVALID, str(error))
    return frame, None


async def _socket_db(function, /, **kwargs):
    """A socket's own database work — its registration, its snapshot, its heartbeat, its
    removal — in the worker's `sockets` pool. On `database_sync_to_async`'s one shared
    thread, a hundred tabs reconnecting at once (a deploy, a network blip) queue behind each
    other and behind the closing sockets' removals, past Daphne's handshake timeout, and are
    refused (docs/design.md §12)."""
    return await in_pool("sockets", function, **kwargs)


def _run_in_turn_thread(function, **kwargs):
    """Run blocking work in a pool thread and close its database connections afterwards.

    Turns can take many seconds (tools like `wait`, slow models). `database_sync_to_async`
    runs everything on one shared thread, where one long turn would stall every other
    consumer of the process; a pool thread does not. The pool's threads are reused, so the
    connection each opened is closed before the thread goes back.
    """
    try:
        return function(**kwargs)
    finally:
        connections.close_all()


def group_rejoin_sec(layer) -> float:
    """How long a socket stays in its group before its heartbeat joins it again. A layer
    forgets a group member after its `group_expiry` (channels_redis: a day), so a socket open
    for days joins again at half of it — not at every heartbeat, which with hundreds of
    sockets was a Redis command per socket every HEARTBEAT_SEC (docs/performance.md)."""
    return getattr(layer, "group_expiry", 86400) / 2


def _refusals_as_frames(handler):
    """The socket's one mapping of a refused request: a `DomainError` from the frame's handler
    becomes the `error` frame {code, message}, the code the HTTP API answers with too."""

    @functools.wraps(handler)
    async def answering(consumer, *args, **kwargs):
        try:
            return await handler(consumer, *args, **kwargs)
        except DomainError as error:
            return await consumer._error(error.code, error.detail)

    return answering


class SessionConsumer(AsyncJsonWebsocketConsumer):
    session_id: str | None = None
    registered = False
    counted = False  # in jarvis_ws_connections and the drain's list of sockets
    watching_notices = False
    send_failure: BaseException | None = None
    lane: FrameLane | None = None
    stopping: asyncio.Task | None = None  # a Stop the frame lane started, on its way
    accepted = False
    let_go = False
    live_socket: live.LiveSocket | None = None

    # --- lifecycle ------------------------------------------------------------------
    async def connect(self):
        try:
            await self._connect()
        except Exception as error:
            if not (redis_away(error) or database_away(error)):
                raise
            # What this socket had joined is left by `_let_go` once it closes.
            logger.warning("socket of session %s refused for now: %s", self.session_id, error)
            if not self.accepted:
                await self.accept()
            await self.close(code=CLOSE_TRY_AGAIN_LATER)

    async def accept(self, subprotocol=None, headers=None):
        self.accepted = True
        await super().accept(subprotocol, headers)

    async def _connect(self):
        loop_lag.watch()  # the worker's loop, measured once sockets use it (§26)
        # Queues this process runs for synchronous callers (the API) and channel-layer sends
        # from synchronous code go to this loop.
        server_loop.serve_on_this_loop()
        self.tasks: set[asyncio.Task] = set()
        self.heartbeat: asyncio.Task | None = None
        self.notices_sent: set[str] = set()
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            return await self._refuse(CLOSE_UNAUTHENTICATED)
        if drain.is_draining():
            return await self._refuse(CLOSE_SERVICE_RESTART)
        try:
            session_id = validate_session_id(self.scope["url_route"]["kwargs"]["session_id"])
        except InvalidSessionId:
            return await self._refuse(CLOSE_BAD_ID)
        query = parse_qs(self.scope.get("query_string", b"").decode("latin-1"))
        try:
            agent = limits.agent_check((query.get("agent") or ["jarvis"])[0])
            after_seq = limits.seq_check((query.get("after_seq") or ["0"])[0], name="after_seq")
        except limits.InputInvalid:
            # The handshake's parameters are part of what it asks for, like the id.
            return await self._refuse(CLOSE_BAD_ID)
        self.user_id = user.id
        self.session_id = session_id
        # This socket's task and the turns it starts log with these (jarvis_site.shared.log_context).
        log_context_set(request_id=new_request_id(), user_id=user.id, session_id=session_id)
        self.group = group_name(session_id)
        if "agent" in query:
            existing = await _socket_db(
                selectors.session_agent_conflict,
                session_id=session_id,
                owner_id=user.id,
                agent=agent,
            )
            if existing is not None:
                await self.accept()
                await self._error(
                    Code.AGENT_MISMATCH, f"session {session_id!r} belongs to agent {existing!r}"
                )
                return await self.close(code=CLOSE_AGENT_MISMATCH)
        # Join before reading the history: an entry stored in between arrives twice (the
        # page keeps one per seq) instead of never.
        await self.channel_layer.group_add(self.group, self.channel_name)
        self.group_joined_at = time.monotonic()
        # Counted as registered before the row exists: a consumer cancelled while the row is
        # written still removes it (removing a row that was never written changes nothing).
        self.registered = True
        try:
            await _socket_db(
                connection_services.connection_open,
                session_id=session_id,
                channel_name=self.channel_name,
                user_id=user.id,
                agent=agent,
            )
        except SessionNotFound:
            self.registered = False
            await self.channel_layer.group_discard(self.group, self.channel_name)
            return await self._refuse(CLOSE_NOT_FOUND)
        except (InvalidSessionId, UnknownAgent) as error:
            # A sub-agent's id that is not this user's session, or a new session of an agent
            # that does not exist: nothing was created; the error says which.
            self.registered = False
            await self.channel_layer.group_discard(self.group, self.channel_name)
            await self.accept()
            await self._error(error.code, error.detail)
            return await self.close(code=CLOSE_BAD_ID)
        await self.accept()
        metrics.WS_CONNECTIONS.inc()
        drain.socket_register(self)
        self.counted = True
        # Joined before the snapshot is read: the running turn's later events wait for it,
        # and the ones it already holds are not sent again (docs/design.md §17).
        self.live_socket = live.LiveSocket(
            session_id,
            self._send_text,
            self.scope.get(WRITE_NOW),
            self.scope.get(SEND_TEXT_NOW),
        )
        running = await live.socket_join(self.live_socket)
        snapshot = await _socket_db(
            selectors.session_snapshot,
            session_id=session_id,
            owner_id=user.id,
            after_seq=after_seq,
            running=running,
        )
        await self.send_json({"type": "session", **snapshot})
        await self.live_socket.go_live(running)
        self.heartbeat = asyncio.create_task(self._heartbeat_loop())
        if snapshot["queue"]:
            # The next worker to touch a session runs what its dead worker left queued.
            prompt_modes.queue_kick(session_id)
        if isinstance(self.channel_layer, InMemoryChannelLayer):
            # Notices stored by another process cannot come through a layer of this process.
            self.notices_sent.update(notice["message_id"] for notice in snapshot["notices"])
            notices_watch(self)
            self.watching_notices = True
        # From now on — after the `session` frame, which a client reads first — a Stop, and
        # a prompt that nothing of this socket waits before, are read as the server reads
        # them, not after three passes through the socket's queue (docs/design.md §26). What
        # they start runs in this socket's context (its log lines).
        self.context = contextvars.copy_context()
        self.lane = frame_lane_install(self.receive_from, self._stop_here, self._prompt_now)

    async def _refuse(self, code: int):
        # Accept first: a close before the handshake completes reaches the client as a bare
        # HTTP 403, without the code that says why.
        await self.accept()
        await self.close(code=code)

    async def __call__(self, scope, receive, send):
        # `disconnect` runs only when `websocket.disconnect` is dispatched. A handler that
        # raises (a send on a transport that went away: the server closes with 1011) or a
        # cancelled consumer (the server stops it) never gets there; letting go here too
        # keeps such a socket from holding its session's registration alive forever.
        self.receive_from = receive  # watched by the frame lane once the socket is open
        try:
            await super().__call__(scope, receive, send)
        finally:
            # Shielded: a second cancellation must not cut the cleanup half-way.
            await asyncio.shield(self._let_go())

    async def disconnect(self, code):
        await self._let_go()

    async def _let_go(self):
        """Stop the heartbeat, leave the notice watcher and the group, remove the connection
        row. Runs once however the socket ended; each step runs even if one before failed."""
        if self.let_go:
            return
        self.let_go = True
        if self.counted:
            self.counted = False
            metrics.WS_CONNECTIONS.dec()
            drain.socket_unregister(self)
        heartbeat = getattr(self, "heartbeat", None)
        if heartbeat is not None:
            heartbeat.cancel()
        if self.live_socket is not None:
            try:
                await live.socket_leave(self.live_socket)
            except Exception:
                logger.exception(
                    "socket of session %s not removed from its live turn", self.session_id
                )
        if self.watching_notices:
            notices_unwatch(self)
        if self.session_id is None:
            return
        if self.registered:
            # First: the row is what keeps the session from being deleted.
            self.registered = False
            try:
                await _socket_db(
                    connection_services.connection_close, channel_name=self.channel_name
                )
            except Exception:
                # The row is not renewed any more: it stops counting after the registry's
                # timeout.
                logger.exception("connection row of session %s not removed", self.session_id)
        try:
            await group_leave(self.channel_layer, self.group, self.channel_name)
        except Exception:
            logger.exception("socket of session %s not removed from its group", self.session_id)

    group_joined_at = -math.inf  # when the socket last joined its session's group

    async def _heartbeat_loop(self):
        while True:
            await asyncio.sleep(connection_services.HEARTBEAT_SEC)
            try:
                if time.monotonic() - self.group_joined_at >= group_rejoin_sec(self.channel_layer):
                    await self.channel_layer.group_add(self.group, self.channel_name)
                    self.group_joined_at = time.monotonic()
                alive = await _socket_db(
                    connection_services.connection_heartbeat, channel_name=self.channel_name
                )
            except Exception:
                # A passing database or Redis failure: the next beat tries again, well
                # within the registry's timeout.
                logger.exception("heartbeat of a socket of session %s failed", self.session_id)
                continue
            if not alive:
                self.registered = False
                await self.close(code=CLOSE_EXPIRED)
                return

    # --- client -> server -----------------------------------------------------------
    async def websocket_receive(self, message):
        # Said before the frame is parsed, and with a code the page shows: silently dropping
        # the socket would only make the page reconnect and send it again.
        data = message.get("text") if message.get("text") is not None else message.get("bytes")
        limit = settings.WEBSOCKET_MESSAGE_MAX_BYTES
        if data is not None and frames.inbound_size(data) > limit:
            await self._error(Code.TOO_LARGE, f"a frame may be at most {limit} bytes")
            return await self.close(code=CLOSE_TOO_LARGE, reason="message too big")
        try:
            await self._stopped_first()
            await super().websocket_receive(message)
        finally:
            if self.lane is not None:
                self.lane.handled()

    async def receive(self, text_data=None, bytes_data=None):
        if text_data is not None and len(text_data) >= PARSE_IN_POOL_CHARS:
            frame, refusal = await in_pool("sockets", frame_checked, text_data)
        else:
            frame, refusal = frame_checked(text_data)
        if refusal is not None:
            return await self._error(*refusal)
        kind = frame["type"]
        if kind == "ping":
            return await self.send_json({"type": "pong"})
        if kind == "abort":
            # In the receive loop itself, not a task: it never waits behind this socket's work.
            return await self._abort()
        if kind == "prompt":
            text = frame.get("text")
            if not isinstance(text, str):
                return await self._error(Code.BAD_REQUEST, prompt_modes.PROMPT_NOT_TEXT)
            try:
                mode = prompt_modes.prompt_mode_check(frame.get("mode"))
            except prompt_modes.BadMode as error:
                return await self._error(error.code, error.detail)
            if text.lstrip().startswith("/"):
                return self._spawn(self._command(text.strip()))
            wait = turn_throttle_wait(self.scope["user"])
            if wait is not None:
                return await self._error(
                    Code.THROTTLED, f"too many requests; try again in {math.ceil(wait)} seconds"
                )
            attachments = frame.get("attachments")
            if mode != prompt_modes.REJECT:
                return await self._enqueue(text, mode, attachments)
            return self._spawn(self._turn(text, attachments))
        if kind == "queue_cancel":
            return await self._queue_cancel(frame)
        if kind == "approval":
            return await self._approval(frame)
        return await self._error(Code.BAD_REQUEST, f"unknown frame type {kind!r}")

    def _prompt_now(self, text_data: str) -> bool:
        """Start the turn of a plain prompt frame as it arrives (the frame lane offers it when
        nothing of this socket waits before it); False, and the frame goes the usual way,
        for anything else: another frame, a command, a mode, a refusal to tell."""
        if '"prompt"' not in text_data:
            return False  # parsed once, by the receive loop
        if self._stop_on_its_way():
            return False  # it waits for the Stop before it, in the queue
        if frames.inbound_size(text_data) > settings.WEBSOCKET_MESSAGE_MAX_BYTES:
            return False
        frame, refusal = frame_checked(text_data)
        if refusal is not None or frame["type"] != "prompt":
            return False
        text = frame.get("text")
        if not isinstance(text, str) or text.lstrip().startswith("/"):
            return False
        if frame.get("mode", prompt_modes.REJECT) != prompt_modes.REJECT:
            return False
        if turn_throttle_wait(self.scope["user"]) is not None:
            return False  # refused again, with its error, by the receive loop
        # Its first step (the request for a store thread) now, not a pass of the loop later:
        # a person's new turn, alone, does not wait for the storm's streaming (§26).
        eager = _STARTS_AT_ONCE.take(asyncio.get_running_loop().time())
        context = self.context.copy()
        if eager:
            context.run(AT_ONCE.set, True)
            first_call_beside(context)
        self._spawn(self._turn(text, frame.get("attachments")), context=context, eager=eager)
        return True

    def _spawn(
        self, coroutine, context: contextvars.Context | None = None, *, eager: bool = False
    ) -> asyncio.Task:
        # Turns and commands run beside the receive loop, so `abort` and `ping` are answered
        # while they work.
        if eager:
            task = start_task(coroutine, context=context)
        else:
            task = asyncio.create_task(coroutine, context=context)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)
        return task

    def _stop_here(self, plain: bool, alone: bool) -> bool:
        """A Stop read where it arrives (the frame lane). The person's turn running on this
        worker stops now: a flag. Otherwise a `plain` Stop's control path starts now too,
        not after the frame's three passes through a busy loop to the receive loop: the
        turn may run on another worker, where the Stop travels over the live bus (§26).
        Until it has ended, the frames after it wait (`_stopped_first`): a prompt sent just
        after a Stop must not start a turn that the Stop then reaches. True when that
        leaves nothing for the receive loop: the Stop came `alone`."""
        if turns.turn_abort_here(session_id=self.session_id, owner_id=self.user_id) or not plain:
            return False
        self.stopping = self._spawn(self._abort(), context=self.context, eager=True)
        return alone

    def _stop_on_its_way(self) -> bool:
        return self.stopping is not None and not self.stopping.done()

    async def _stopped_first(self) -> None:
        """Wait for the Stop the frame lane started, if it is still on its way."""
        if self._stop_on_its_way():
            await asyncio.wait({self.stopping})  # not cancelled with the receive loop

    @_refusals_as_frames
    async def _abort(self):
        # The check and the lease mark go through the small control pool: a turn of this
        # worker stops at once, whatever else the worker is busy with. This socket was
        # accepted for the person's session: the Stop leaves for the worker running the turn
        # before the session is checked again.
        await turns.turn_abort_async(
            session_id=self.session_id, owner_id=self.user_id, owner_known=True
        )

    @_refusals_as_frames
    async def _turn(self, text: str, attachments=None):
        try:
            # The turn runs on this worker's event loop: its model call holds no thread, its
            # store writes and blocking tools go through bounded pools (runtime.loop.executors).
            await turns.turn_send_async(
                session_id=self.session_id,
                owner_id=self.user_id,
                text=text,
                attachments=attachments,
            )
        except DomainError:
            raise
        except Exception as error:
            if database_away(error):
                # Nothing was stored: the prompt can be sent again once the database is back.
                logger.warning("turn refused in session %s: %s", self.session_id, error)
                return await self._error(
                    Code.DATABASE_UNAVAILABLE, detail_of(Code.DATABASE_UNAVAILABLE)
                )
            logger.exception("turn failed in session %s", self.session_id)
            await self._error(Code.TURN_FAILED, "the turn failed; the error is in the server log")

    @_refusals_as_frames
    async def _enqueue(self, text: str, mode: str, attachments=None):
        # Every tab, this one too, learns the prompt's place from the `queued` event.
        await database_sync_to_async(prompt_modes.prompt_enqueue)(
            session_id=self.session_id,
            owner_id=self.user_id,
            text=text,
            mode=mode,
            attachments=attachments,
        )

    @_refusals_as_frames
    async def _queue_cancel(self, frame: dict):
        queue_id = frame.get("queue_id")
        if not isinstance(queue_id, str) or not queue_id:
            return await self._error(
                Code.BAD_REQUEST, 'a queue_cancel frame has a "queue_id" string'
            )
        await database_sync_to_async(prompt_modes.queue_cancel)(
            session_id=self.session_id, owner_id=self.user_id, queue_id=queue_id
        )

    @_refusals_as_frames
    async def _command(self, line: str):
        result = await sync_to_async(_run_in_turn_thread, thread_sensitive=False)(
            commands.command_run, session_id=self.session_id, owner_id=self.user_id, line=line
        )
        await self.send_json(
            {
                "type": "command_result",
                "command": result.command,
                "text": result.text,
                "data": result.data,
            }
        )

    @_refusals_as_frames
    async def _approval(self, frame: dict):
        call_id, allow = frame.get("call_id"), frame.get("allow")
        if not isinstance(call_id, str) or not call_id or not isinstance(allow, bool):
            return await self._error(
                Code.BAD_REQUEST, 'an approval has a "call_id" (string) and "allow" (true or false)'
            )
        await database_sync_to_async(approvals.approval_decide)(
            session_id=self.session_id, owner_id=self.user_id, call_id=call_id, allow=allow
        )

    async def _error(self, code: str, message: str):
        await self.send_json({"type": "error", "code": code, "message": message})

    # --- server -> client -----------------------------------------------------------
    @classmethod
    async def encode_json(cls, content):
        # Every frame goes through here: UTF-8 JSON, never over the message limit.
        return frames.frame_text(content)

    async def _send_text(self, text: str) -> None:
        # A turn's event, encoded once for every socket of the session (sessions_app.runtime.live.live).
        try:
            await self.send(text_data=text)
        except Exception as error:
            # The transport is gone (the server closes it with 1011 and never delivers
            # websocket.disconnect). This send ran in the turn's task, not in this
            # consumer's: hand the failure to the consumer's own loop, so that it ends and
            # lets go of its session as it does when one of its own sends fails.
            self.send_failure = error
            await self.channel_layer.send(self.channel_name, {"type": "socket.lost"})
            raise

    async def socket_lost(self, message):
        raise self.send_failure

    # --- channel layer -> client ----------------------------------------------------
    async def dispatch(self, message):
        # Channels closes stale database connections before every handler, with a hop to
        # the database thread. Turn events reach every socket of a session many times a
        # second and need no database here (a notice's delivery goes through
        # database_sync_to_async, which closes stale connections itself).
        if message["type"] == "session.event":
            return await self.session_event(message)
        return await super().dispatch(message)

    async def session_event(self, message):
        event = message["event"]
        if event.get("type") == "proactive":
            return await self._send_notice(event["notice"])
        await self.send_json(event)

    async def _send_notice(self, notice: dict):
        # A notice can arrive twice (the group and the notice watcher): each tab shows it once.
        if notice["message_id"] in self.notices_sent:
            return
        self.notices_sent.add(notice["message_id"])
        await self.send_json({"type": "proactive", "notice": notice})
        if notice.get("delivered_at") is None:
            # This socket received it: the notice counts as delivered.
            await database_sync_to_async(notices.notice_mark_delivered)(
                session_id=self.session_id, message_id=notice["message_id"]
            )

    async def notice_found(self, notice: dict):
        await self._send_notice(notice)

    # --- drain ----------------------------------------------------------------------
    async def drain_close(self):
        """Close with 1012 once this session's turn on this worker (if any) has ended.

        The turn hands its `agent_end` to this worker's sockets before it counts as ended,
        and the close goes through this socket's own channel after that, so the client
        receives the whole answer, then the close."""
        await drain.turns_done(session_id=self.session_id)
        await self.channel_layer.send(self.channel_name, {"type": "drain.closing"})

    async def drain_closing(self, message):
        await self.close(code=CLOSE_SERVICE_RESTART)


class UnknownPathConsumer(AsyncWebsocketConsumer):
    """Any WebSocket path without a route: closed with 4400 after the handshake, so the client
    sees why (a bare refusal would reach it as HTTP 403)."""

    async def connect(self):
        await self.accept()
        await self.close(code=CLOSE_BAD_ID)
