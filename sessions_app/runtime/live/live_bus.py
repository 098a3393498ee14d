"""Turn events between workers: one Redis PUBLISH per event (docs/design.md §17).

With REDIS_URL, each worker process keeps two pub/sub connections (events; control and
answers) and one publishing connection per event loop. Three kinds of Redis channel:

- `<prefix><session id>`: the events of the session's running turn. A worker subscribes while
  it has sockets of the session and does not run its turn itself; the worker that runs the
  turn publishes each event once, whoever listens (zero, one or ten workers, one message
  each), and hands it to its own sockets directly.
- `<prefix><session id>:control`: subscribed by the worker running the session's turn, for
  as long as the turn runs. Another worker sends `ask` (the running state, for a socket that
  joins) and `abort` there. PUBLISH answers how many workers received a message, so an asker
  knows at once whether anyone runs the turn — no waiting on silence.
- `<prefix>worker:<worker id>`: answers to this worker's asks.

Both pub/sub connections are read on threads of the worker's own (runtime.live.pubsub_line), not
by the busy event loop: an `abort` sets the turn's flag on the control line's thread at once,
and the rest (asks, answers, confirmations, followed events) reaches the loop in one callback
at the front of its queue, in the order it was read.

Why not channels-redis's layers: a group send is a Lua script that pushes one copy per
receiving socket's channel, and its pub/sub layer still sends one message per group member
socket; here a message goes once to each subscribed worker, which hands the same frame text
to its sockets without decoding it (docs/performance.md has the numbers).

Every PUBLISH (events, asks, aborts, answers) leaves through one connection, batched (one
write for what a pass of the event loop queued): events of a turn keep their order (one
connection, FIFO), 200 streaming turns cost a write per pass instead of one per event, and
200 tabs asking at once need no connection each (the pool has 100). The receivers' counts
are read by a task of their own, so a batch never waits for the answers to the one before
it, and a turn's end, an ask, an abort and an answer are written in the step that queues
them: under a storm each of those waits was a pass of the loop, and a Stop's `agent_end`
reached the other workers a third of a second late.

A turn nobody follows elsewhere publishes nothing. PUBLISH answers how many workers got the
message; once a turn's publish reached none, its next events stay here, until another
worker asks for the running state — which every worker does when a socket of the session
joins it, after subscribing. The state answered holds every event so far, and the events
after it are published again, so the new follower misses none. A zero counts only for a
publish of this turn sent after the session's last ask: an earlier one may have reached
Redis before the asker's subscription did. (A worker whose sockets followed the session
before the turn started hears its first event, which is always published.)

The runner itself may be among the receivers: its sockets followed the session until the
turn started, and its UNSUBSCRIBE reaches Redis some time after. A count taken while that
UNSUBSCRIBE is unconfirmed is judged when the confirmation arrives: by then every copy of
its own events that Redis sent back has been read (a connection's messages come in order),
so the count less the copies it got back is what the other workers got.

Redis going away (docs/design.md §32) stops nothing here: a turn's events reach this worker's
sockets without Redis, its publishes fail and are dropped meanwhile. Each line subscribes
again when Redis is back (runtime.live.pubsub_line); once both are, the bus catches up every
session it follows: it asks whoever runs the session's turn now (its control channel) for the
events after the last one this worker delivered, and the worker that ran the last turn seen
unfinished (its answers' channel) for that turn's rest, delivers what it gets in order, then
what arrived meanwhile, never an event twice. A turn keeps its events for this (runtime.live.live)
until RECENT_TURN_SEC after its end.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import logging
import threading
import uuid
import weakref
from collections.abc import Awaitable, Callable
from typing import Any, NamedTuple

import redis.asyncio as aioredis
from django.conf import settings

from jarvis_site.shared.outages import REDIS_AWAY_ERRORS
from sessions_app.core import frames
from sessions_app.runtime.live.pubsub_line import PubSubLine
from sessions_app.runtime.loop.eager import start_task
from sessions_app.runtime.loop.loop_lane import call_first_threadsafe
from sessions_app.store.workers import current_worker_id

logger = logging.getLogger(__name__)

PREFIX = "jarvis:live:"
# An asker gives up on an answer after this long: the worker that received the question
# died before answering (a live one answers within a turn of its event loop).
ASK_GUARD_SEC = 5.0


def events_channel(session_id: str) -> str:
    return f"{PREFIX}{session_id}"


def control_channel(session_id: str) -> str:
    return f"{PREFIX}{session_id}:control"


# What the worker does with what arrives, set once by sessions_app.runtime.live.live: the bus knows
# nothing of turns or sockets.
OnEvent = Callable[[str, str, int, str], Awaitable[None]]
OnAsk = Callable[[str], dict[str, Any] | None]
OnAbort = Callable[[str], None]
# (session id, turn id or None, after) -> the turn's events after `after` that this worker
# still has, as (turn id, event_seq, frame text); then those of the session's running turn
# here when it is another.
OnReplay = Callable[[str, str | None, int], list[tuple[str, int, str]]]
_handlers: dict[str, Any] = {}
# Between tries at the runner of a session's turn while catching up: its line may come back
# after this worker's.
CATCH_UP_RETRY_SEC = 0.25


class RedisAway(ConnectionError):
    """Redis cannot be reached now (docs/design.md §32)."""


class Seen(NamedTuple):
    """The last event of a session's turns this worker delivered from another worker."""

    worker: str
    turn_id: str
    event_seq: int
    ended: bool


def handlers_set(
    *, on_event: OnEvent, on_ask: OnAsk, on_abort: OnAbort, on_replay: OnReplay
) -> None:
    _handlers.update(on_event=on_event, on_ask=on_ask, on_abort=on_abort, on_replay=on_replay)


def worker_channel(worker: str) -> str:
    return f"{PREFIX}worker:{worker}"


class LiveBus:
    """The pub/sub side of one worker's event loop."""

    def __init__(self, url: str):
        self.worker = f"{current_worker_id()}:{uuid.uuid4().hex[:6]}"
        self.origin = f"{self.worker}\n".encode()
        self.reply_channel = worker_channel(self.worker)
        # No socket timeout on any of the connections: redis-py sends each command
        # under asyncio.wait_for when it has one (5 s unless told otherwise), and on Python
        # 3.11 that runs the send as a task of its own, three passes of the event loop. A
        # pass takes a quarter of a second on a worker starting a storm of turns, so every
        # SUBSCRIBE, publish and Stop waited most of a second before a byte left
        # (docs/performance.md). The publisher's commands are bounded by `_bounded`
        # instead, which adds no task; the subscribers' reads block for as long as nothing
        # is published, so they have no timeout at all.
        self.redis = aioredis.Redis.from_url(
            url,
            socket_timeout=None,
            socket_connect_timeout=settings.REDIS_CONNECT_TIMEOUT_SEC,
            **settings.REDIS_CONNECTION_OPTIONS,
        )
        # Control before data: asks, aborts and their answers arrive on a connection of
        # their own, so a Stop never waits behind the events of every turn this worker
        # follows (a busy worker reads those seconds late). Both connections are read on
        # threads of their own (runtime.live.pubsub_line), so neither waits for this loop: what
        # a line hands over waits in `inbox` for one callback at the front of the loop's
        # queue, in the order it arrived.
        self.loop = asyncio.get_running_loop()
        self.inbox: collections.deque[tuple[str, Any]] = collections.deque()
        self.inbox_lock = threading.Lock()
        self.inbox_called = False  # a callback to empty the inbox is on its way
        self.events_due: collections.deque[dict] = collections.deque()
        # A delivery of `events_due` is under way. Not its task's `done()`: an eagerly
        # started task that has finished its work is not done until the loop runs its last
        # step, and events handed over meanwhile waited for the next message (a turn's
        # `agent_end` for ever).
        self.delivering = False
        self.events_delivery: asyncio.Task | None = None
        own = weakref.ref(self)  # the threads must not keep the bus alive
        self.control_line = PubSubLine(
            "live-bus-control",
            url,
            on_message=lambda message: _on_control_line(own, message),
            on_failed=lambda channels, error: _hand_over(own, ("failed", (channels, error))),
            on_lost=lambda: _hand_over(own, ("lost", "control")),
            on_back=lambda: _hand_over(own, ("back", "control")),
        )
        self.events_line = PubSubLine(
            "live-bus-events",
            url,
            on_message=lambda message: _hand_over(own, ("event", message)),
            on_failed=lambda channels, error: _hand_over(own, ("failed", (channels, error))),
            on_lost=lambda: _hand_over(own, ("lost", "events")),
            on_back=lambda: _hand_over(own, ("back", "events")),
        )
        self.lines_lost: set[str] = set()  # the lines whose Redis connection is away
        self.seen: dict[str, Seen] = {}  # followed session -> its last event delivered here
        # Sessions being caught up -> what arrived meanwhile: (worker, turn, event_seq, text).
        self.catching_up: dict[str, list[tuple[str, str, int, str]]] = {}
        self.publish_failing = False  # said once per outage in the log
        # The threads end with the bus (tests make many; a worker keeps one for good).
        weakref.finalize(self, self.control_line.close)
        weakref.finalize(self, self.events_line.close)
        self.followers: dict[str, int] = {}  # session id -> local sockets following it
        self.own_turns: set[str] = set()  # sessions whose turn runs on this loop
        self.subscribed: dict[str, asyncio.Future] = {}  # channel -> its confirmation
        self.answers: dict[str, asyncio.Future] = {}
        # Every PUBLISH of the bus, in order: (channel, data, and for an event its session,
        # number and (turn id, event_seq); for a message its count's future, if awaited).
        self.outbox: list[Publish] = []
        self.published = 0  # events queued by `publish_event`, numbered
        self.unheard: set[str] = set()  # own turns whose last publish reached no worker
        # Own turns: a publish that reached nobody counts only if numbered past this (the
        # `published` of the turn's start, or of the session's last ask).
        self.zeros_count_after: dict[str, int] = {}
        self.leaving: dict[str, int] = {}  # channel -> UNSUBSCRIBEs not yet confirmed
        # Own turn -> its events (turn id, event_seq) that Redis sent back here.
        self.echoes: dict[str, set[tuple[str, int]]] = {}
        # Own turn -> (number, event, receivers) of publishes judged at the confirmation.
        self.unjudged: dict[str, list[tuple[int, tuple[str, int], int]]] = {}
        # Own turn -> (its control subscription's confirmation, the events held until then).
        self.held: dict[str, tuple[asyncio.Future, list[tuple[str, int, str]]]] = {}
        self.outbox_ready = asyncio.Event()
        # The publishes' connection, taken from the publisher's pool for good (closing the
        # publisher closes it), and what was written on it whose counts are still unread:
        # (the connection's generation, the batch). A failure ends a generation: the
        # replies of its batches are never matched to another generation's.
        self.batch_connection = None
        self.generation = 0
        self.write_lock = asyncio.Lock()  # FIFO: batches are written in the order taken
        self.in_flight: collections.deque[tuple[int, list]] = collections.deque()
        self.replies_due = asyncio.Event()
        self.replier: asyncio.Task | None = None
        self.publisher = asyncio.ensure_future(self._publish_loop())
        # Answers to this worker's questions arrive once this is subscribed (a question waits
        # for it; while Redis is away it is subscribed again when Redis is back).
        self.reply_ready = asyncio.ensure_future(self._subscribe(self.reply_channel))
        self.reply_ready.add_done_callback(_retrieved)

    # --- subscriptions --------------------------------------------------------------------
    def _line_of(self, channel: str) -> PubSubLine:
        if channel == self.reply_channel or channel.endswith(":control"):
            return self.control_line
        return self.events_line

    async def _subscribe(self, channel: str) -> None:
        """Subscribed now, or RedisAway at once while Redis is away (the line subscribes
        again when it is back)."""
        confirmed = self._subscribing(channel)
        if not confirmed.done() and self.lines_lost:
            raise RedisAway("Redis is away")
        await confirmed

    def _subscribing(self, channel: str) -> asyncio.Future:
        """The confirmation of the channel's subscription, asked for unless it was (never
        waits)."""
        confirmed = self.subscribed.get(channel)
        if confirmed is None:
            confirmed = self.subscribed[channel] = asyncio.get_running_loop().create_future()
            self._line_of(channel).listen(channel)
        return confirmed

    def _unsubscribe(self, channel: str) -> None:
        if self.subscribed.pop(channel, None) is not None:
            self.leaving[channel] = self.leaving.get(channel, 0) + 1
            self._line_of(channel).forget(channel)

    def _subscribe_failed(self, channels: list[str], error: Exception) -> None:
        for channel in channels:
            confirmed = self.subscribed.get(channel)
            if confirmed is not None and not confirmed.done():
                confirmed.set_exception(error)
                confirmed.exception()  # whoever waits gets it; nobody need
                self._release(_session_of(channel), confirmed)  # published anyway
                # Still wanted: its line subscribes again once Redis is back, and that
                # confirmation settles this one.
                self.subscribed[channel] = self.loop.create_future()

    def _subscription_news(self, message: dict) -> bool:
        """A line's (un)subscription confirmed (True), in the callback that reads it: a
        turn's held events leave now, not in the future's callback a pass later."""
        channel = message["channel"].decode()
        if message["type"] == "subscribe":
            confirmed = self.subscribed.get(channel)
            if confirmed is not None and not confirmed.done():
                confirmed.set_result(None)
                self._release(_session_of(channel), confirmed)
            return True
        if message["type"] == "unsubscribe":
            self._left(channel)
            return True
        return False

    async def follow(self, session_id: str) -> None:
        """Receive the session's events from other workers; returns once subscribed."""
        self.followers[session_id] = self.followers.get(session_id, 0) + 1
        if session_id not in self.own_turns:
            await self._subscribe(events_channel(session_id))

    async def unfollow(self, session_id: str) -> None:
        left = self.followers.get(session_id, 0) - 1
        if left > 0:
            self.followers[session_id] = left
            return
        self.followers.pop(session_id, None)
        self.seen.pop(session_id, None)
        self._unsubscribe(events_channel(session_id))

    def turn_starting(self, session_id: str) -> None:
        """Subscribe to the session's control channel while the turn is still starting (never
        waits), so that `turn_started` finds the subscription confirmed: on a busy worker
        each step of a subscription waits for a pass of the event loop, and the turn's
        first event waits for all of them. An `ask` answered meanwhile finds no running
        turn, which is true until the turn's first event."""
        self._subscribing(control_channel(session_id))

    async def turn_not_started(self, session_id: str) -> None:
        """The turn `turn_starting` announced never started (the session was busy, or gone)."""
        if session_id not in self.own_turns:
            self._unsubscribe(control_channel(session_id))

    def turn_started(self, session_id: str) -> None:
        """Answer asks and aborts for the session's turn (never waits).

        The turn's events are published only once its control subscription is confirmed
        (until then `publish_event` holds them): an asker that found nobody asked before
        that, and had subscribed to the events before it asked, so it gets every one. This
        worker's own sockets get the events at once meanwhile: a turn's first events — a
        Stop's `agent_end` among them — never wait for a Redis round trip on a busy loop."""
        # While this worker runs the session's turn, no other worker can (the turn lease):
        # its sockets need no events from the bus, and this worker no echo of its own.
        self.own_turns.add(session_id)
        self._forget_counts(session_id)
        self.zeros_count_after[session_id] = self.published
        confirmed = self._subscribing(control_channel(session_id))
        if not confirmed.done():
            self.held[session_id] = (confirmed, [])  # until `_subscription_news`
        self._unsubscribe(events_channel(session_id))

    async def turn_ended(self, session_id: str) -> None:
        """Listen again for the session's events; returns once subscribed, before the turn
        lets go of its lease, so the next turn's events reach this worker's sockets
        wherever it runs. Events still held are published first, once the control
        subscription is confirmed (or failed, or `ASK_GUARD_SEC` passed)."""
        held = self.held.get(session_id)
        if held is not None:
            with contextlib.suppress(Exception):  # failed, or never answered: publish anyway
                async with asyncio.timeout(ASK_GUARD_SEC):
                    await asyncio.shield(held[0])
            self._release(session_id, held[0])
        self.own_turns.discard(session_id)
        self._forget_counts(session_id)
        if self.followers.get(session_id):
            # Redis away: subscribed once it is back (the turn's end must not wait for it).
            with contextlib.suppress(RedisAway, *REDIS_AWAY_ERRORS):
                await self._subscribe(events_channel(session_id))
        self._unsubscribe(control_channel(session_id))

    # --- publishing -----------------------------------------------------------------------
    def publish_event(self, session_id: str, turn_id: str, event_seq: int, text: str) -> None:
        """Queue the event's frame for the other workers (never waits); nothing when no other
        worker follows the session (see the module's docstring) — but always the turn's
        end: a follower whose subscription was cut and came back without asking (Redis
        reconnected) still learns that the turn ended and reads what it missed."""
        if session_id in self.unheard and not frames.is_turn_end(text):
            return
        held = self.held.get(session_id)
        if held is not None:
            held[1].append((turn_id, event_seq, text))
            return
        self._publish_now(session_id, turn_id, event_seq, text)

    def _release(self, session_id: str, confirmed: asyncio.Future) -> None:
        """Publish what the turn held, in order, once `confirmed` (its control subscription)
        is settled; a late settlement of an earlier turn's subscription releases nothing."""
        held = self.held.get(session_id)
        if held is None or held[0] is not confirmed:
            return
        del self.held[session_id]
        for turn_id, event_seq, text in held[1]:
            self._publish_now(session_id, turn_id, event_seq, text)

    def _publish_now(self, session_id: str, turn_id: str, event_seq: int, text: str) -> None:
        self.published += 1
        data = f"{self.worker}\n{turn_id}\n{event_seq}\n{text}"
        self.outbox.append(
            Publish(
                events_channel(session_id), data, session_id, self.published, (turn_id, event_seq)
            )
        )
        if frames.is_turn_end(text):
            # Written in this step (after what was queued before it): the other workers'
            # tabs — a Stop's among them — learn of the end a pass of the loop sooner.
            start_task(self._write_outbox())
        else:
            self.outbox_ready.set()

    async def _publish_loop(self) -> None:
        # Connected now, not by the first event to publish: most turns publish nothing
        # until their end, and a connection opened then took a few passes of a busy loop
        # (its handshake's round trips) before a Stop's `agent_end` could leave.
        async with self.write_lock:
            try:
                await self._batch_connection()
            except (aioredis.RedisError, OSError):
                logger.warning("live bus: Redis unreachable; the first publish tries again")
        while True:
            await self.outbox_ready.wait()
            self.outbox_ready.clear()
            await self._write_outbox()

    async def _write_outbox(self) -> None:
        """PUBLISH everything queued, in one write on the publishes' own connection, after
        every batch taken before it. Not redis-py's pipeline: it hands its connection back
        to the pool under asyncio.shield, a task of its own, and the next batch waited three
        more passes of the event loop for it (docs/performance.md). With the connection
        open, the write happens in the caller's step."""
        batch, self.outbox = self.outbox, []
        if not batch:
            return
        async with self.write_lock:
            generation = self.generation
            try:
                try:
                    await self._write_batch(batch)
                except (aioredis.RedisError, OSError):
                    # The connection may be one Redis closed in an outage now over: once
                    # more on a new one before the batch counts as lost (§32).
                    await self._connection_lost(generation)
                    generation = self.generation
                    await self._write_batch(batch)
            except (aioredis.RedisError, OSError) as error:
                # The other workers' tabs miss these events until Redis is back: then they
                # catch up (see the module's docstring). A caller awaiting a count gets the
                # error.
                if not self.publish_failing:
                    self.publish_failing = True
                    logger.warning("live events cannot be published: %s", error)
                _failed(batch, error)
                await self._connection_lost(generation)
                return
            self.publish_failing = False
            self.in_flight.append((generation, batch))
            self.replies_due.set()
            if self.replier is None:
                self.replier = asyncio.ensure_future(self._reply_loop())

    async def _write_batch(self, batch: list[Publish]) -> None:
        connection = await self._batch_connection()
        async with _bounded():
            await connection.send_packed_command(
                connection.pack_commands([("PUBLISH", p.channel, p.data) for p in batch]),
                check_health=False,
            )

    async def _batch_connection(self):
        """The publishes' connection, opened if it is not (under `write_lock`)."""
        if self.batch_connection is None:
            self.batch_connection = await self.redis.connection_pool.get_connection()
        elif not self.batch_connection.is_connected:
            await self.batch_connection.connect()
        return self.batch_connection

    async def _reply_loop(self) -> None:
        """Read the receivers' counts of what was written, in order, and judge them."""
        while True:
            await self.replies_due.wait()
            self.replies_due.clear()
            while self.in_flight:
                generation, batch = self.in_flight[0]
                if generation != self.generation:
                    self.in_flight.popleft()  # written on a connection since dropped
                    _failed(batch, ConnectionError("the live bus connection was dropped"))
                    continue
                try:
                    async with _bounded():
                        receivers = [await self.batch_connection.read_response() for _ in batch]
                except (aioredis.RedisError, OSError) as error:
                    logger.warning("live event counts could not be read: %s", error)
                    self.in_flight.popleft()
                    _failed(batch, error)
                    await self._connection_lost(generation)
                    continue
                self.in_flight.popleft()
                self._count(batch, receivers)

    async def _connection_lost(self, generation: int) -> None:
        """Replies half read cannot be matched to their commands any more: the connection
        is dropped (the next write opens it again), and the counts of what was written on
        it are never read — their turns go on publishing, which loses nothing."""
        if generation != self.generation:
            return  # that connection was dropped already
        self.generation += 1
        if self.batch_connection is not None:
            await self.batch_connection.disconnect(nowait=True)

    def _count(self, batch: list[Publish], receivers: list[int]) -> None:
        for publish, count in zip(batch, receivers, strict=True):
            if publish.counted is not None:
                if not publish.counted.done():  # its caller may have stopped waiting
                    publish.counted.set_result(count)
                continue
            session_id, number = publish.session_id, publish.number
            if number <= self.zeros_count_after.get(session_id, number):
                continue  # not an own turn's, or sent before its last ask
            if self.leaving.get(publish.channel):
                self.unjudged.setdefault(session_id, []).append((number, publish.event, count))
            else:
                self._judge(session_id, number, publish.event, count)

    def _judge(self, session_id: str, number: int, event: tuple[str, int], receivers: int) -> None:
        """Whether publish `number` (of `event`, an own turn's) reached another worker; if
        not, the turn's next events stay home (`unheard`)."""
        if number <= self.zeros_count_after.get(session_id, number):
            return  # the turn ended, or a worker asked since
        echoed = event in self.echoes.get(session_id, ())
        if receivers - echoed == 0:
            self.unheard.add(session_id)

    def _left(self, channel: str) -> None:
        """Redis confirmed an UNSUBSCRIBE: the counts taken meanwhile can be judged."""
        left = self.leaving.get(channel, 0) - 1
        if left > 0:
            self.leaving[channel] = left
            return
        self.leaving.pop(channel, None)
        session_id = channel.removeprefix(PREFIX)
        for number, event, receivers in self.unjudged.pop(session_id, []):
            self._judge(session_id, number, event, receivers)
        self.echoes.pop(session_id, None)

    def _forget_counts(self, session_id: str) -> None:
        self.unheard.discard(session_id)
        self.zeros_count_after.pop(session_id, None)
        self.echoes.pop(session_id, None)
        self.unjudged.pop(session_id, None)

    async def ask(self, session_id: str) -> dict[str, Any] | None:
        """The running state of the session's turn from the worker that runs it; None when
        no worker runs one (or it died before answering). RedisAway while Redis is away."""
        reply = await self._question(control_channel(session_id), {"kind": "ask"})
        if reply is None:
            if self.lines_lost:
                raise RedisAway("Redis is away")
            return None
        return reply["running"]

    async def _question(self, channel: str, message: dict) -> dict | None:
        """PUBLISH a question to `channel` and return its answer; None when nobody listens
        there, nobody answered within ASK_GUARD_SEC, or Redis is away."""
        try:
            await self._subscribe(self.reply_channel)
        except (RedisAway, *REDIS_AWAY_ERRORS):
            return None
        question = uuid.uuid4().hex
        answer = self.answers[question] = asyncio.get_running_loop().create_future()
        message = {**message, "question": question, "reply_to": self.reply_channel}
        try:
            if not await self._publish(channel, json.dumps(message)):
                return None
            async with asyncio.timeout(ASK_GUARD_SEC):
                return await answer
        except TimeoutError:
            logger.warning("no answer on %s", channel)
            return None
        except REDIS_AWAY_ERRORS:
            return None
        finally:
            self.answers.pop(question, None)

    async def abort(self, session_id: str) -> bool:
        """Tell the worker that runs the session's turn to stop it; False when none listens
        (or Redis is away: the lease's mark reaches the turn then)."""
        message = json.dumps({"kind": "abort"})
        try:
            return bool(await self._publish(control_channel(session_id), message))
        except REDIS_AWAY_ERRORS:
            return False

    async def _publish(self, channel: str, message: str) -> int:
        """PUBLISH one message now (written in this step when no write is under way): how
        many workers received it. Through the publishes' own connection, after everything
        queued before it: a connection of the pool each, 200 tabs joining at once took more
        than the pool has."""
        counted = self.loop.create_future()
        self.outbox.append(Publish(channel, message, counted=counted))
        start_task(self._write_outbox())
        async with _bounded():
            return await counted

    def _publish_unawaited(self, channel: str, message: str) -> None:
        """PUBLISH one message now; nobody waits for its count."""
        self.outbox.append(Publish(channel, message))
        start_task(self._write_outbox())

    # --- receiving ------------------------------------------------------------------------
    def inbox_empty(self) -> None:
        """On the loop: what the lines handed over, in order. Events are delivered by one
        task at a time, in this callback until a delivery waits."""
        with self.inbox_lock:
            items, self.inbox = self.inbox, collections.deque()
            self.inbox_called = False
        for kind, item in items:
            try:
                if kind == "event":
                    self.events_due.append(item)
                elif kind == "control":
                    self._received_on_line(item)
                elif kind == "failed":
                    self._subscribe_failed(*item)
                elif kind == "lost":
                    # An UNSUBSCRIBE in flight is never confirmed now; counts are judged at
                    # once (one that includes this worker only keeps the events published).
                    self.leaving.clear()
                    self.lines_lost.add(item)
                else:  # back
                    self.lines_lost.discard(item)
                    if not self.lines_lost:
                        self._back()
            except Exception:  # noqa: BLE001 - one bad message must not stop the worker's bus
                logger.exception("live bus message failed")
        if self.events_due and not self.delivering:
            self.events_delivery = start_task(self._deliver_events())

    async def _deliver_events(self) -> None:
        self.delivering = True
        try:
            while self.events_due:
                message = self.events_due.popleft()
                try:
                    await self._received(message)
                except Exception:  # noqa: BLE001 - one bad message must not stop the bus
                    logger.exception("live bus message failed")
        finally:
            self.delivering = False

    def _received_on_line(self, message: dict) -> None:
        """What the control line read: confirmations, answers to this worker's asks, asks."""
        if self._subscription_news(message) or message["type"] != "message":
            return
        channel = message["channel"].decode()
        data = message["data"]
        if channel == self.reply_channel:
            reply = json.loads(data)
            if reply.get("kind") == "replay":  # about a turn this worker ran
                self._answer(reply["session"], reply)
                return
            answer = self.answers.get(reply["question"])
            if answer is not None and not answer.done():
                answer.set_result(reply)
            return
        self._answer(_session_of(channel), json.loads(data))

    async def _received(self, message: dict) -> None:
        """What the events line read: a session's events, (un)subscriptions."""
        if self._subscription_news(message) or message["type"] != "message":
            return
        channel = message["channel"].decode()
        data = message["data"]
        session_id = channel.removeprefix(PREFIX)
        if data.startswith(self.origin) and session_id in self.zeros_count_after:
            # Published before this worker's unsubscribe took effect: its sockets had the
            # event from the turn itself. Noted, so that the publish's count is judged
            # without this worker (see the module's docstring).
            _, turn_id, event_seq, _ = data.split(b"\n", 3)
            echo = (turn_id.decode(), int(event_seq))
            self.echoes.setdefault(session_id, set()).add(echo)
            return
        if data.startswith(self.origin):
            return
        worker, turn_id, event_seq, text = data.decode().split("\n", 3)
        caught = self.catching_up.get(session_id)
        if caught is not None:
            caught.append((worker, turn_id, int(event_seq), text))
            return
        await self._deliver(session_id, worker, turn_id, int(event_seq), text)

    async def _deliver(
        self, session_id: str, worker: str, turn_id: str, event_seq: int, text: str
    ) -> None:
        """Hand a followed turn's event to this worker's sockets, unless it was (a catch-up
        and the live events overlap)."""
        last = self.seen.get(session_id)
        if last is not None and last.turn_id == turn_id and event_seq <= last.event_seq:
            return
        self.seen[session_id] = Seen(worker, turn_id, event_seq, frames.is_turn_end(text))
        await _handlers["on_event"](session_id, turn_id, event_seq, text)

    # --- after an outage ------------------------------------------------------------------
    def _back(self) -> None:
        """Both lines are subscribed again: catch up every session followed here."""
        logger.warning("live bus: Redis is back; catching up %d sessions", len(self.followers))
        for session_id in list(self.followers):
            if session_id not in self.own_turns and session_id not in self.catching_up:
                self.catching_up[session_id] = []
                start_task(self._catch_up(session_id))

    async def _catch_up(self, session_id: str) -> None:
        """The events of the session's turns this worker missed, delivered in order: the rest
        of the last turn seen unfinished, from the worker that ran it; then those of the
        turn running now, from whoever runs it."""
        try:
            last = self.seen.get(session_id)
            if last is not None and not last.ended:
                await self._replay(session_id, worker_channel(last.worker), persist=True)
            await self._replay(session_id, control_channel(session_id), persist=False)
        except Exception:  # noqa: BLE001 - what arrives live is still delivered
            logger.exception("catching up session %s failed", session_id)
        finally:
            buffered = self.catching_up.pop(session_id, [])
        for worker, turn_id, event_seq, text in buffered:
            await self._deliver(session_id, worker, turn_id, event_seq, text)

    async def _replay(self, session_id: str, channel: str, *, persist: bool) -> None:
        """Ask on `channel` for the session's events after the last one delivered here, and
        deliver them. `persist`: ask again until answered, for up to ASK_GUARD_SEC (the
        worker asked may see Redis back a moment after this one)."""
        deadline = self.loop.time() + ASK_GUARD_SEC
        while True:
            asked = {"kind": "replay", "session": session_id}
            last = self.seen.get(session_id)
            if last is not None:
                asked |= {"turn_id": last.turn_id, "after": last.event_seq}
            reply = await self._question(channel, asked)
            if reply is not None or not persist or self.loop.time() >= deadline:
                break
            await asyncio.sleep(CATCH_UP_RETRY_SEC)
        for turn_id, event_seq, text in reply["frames"] if reply is not None else ():
            await self._deliver(session_id, reply["worker"], turn_id, event_seq, text)

    def _answer(self, session_id: str, question: dict) -> None:
        """An `ask` or a `replay` about a turn of this worker's (an `abort` is acted on by the
        line's thread: `_on_control_line`)."""
        if question["kind"] == "replay":
            frames_missed = _handlers["on_replay"](
                session_id, question.get("turn_id"), question.get("after", 0)
            )
            if session_id in self.zeros_count_after:
                self.zeros_count_after[session_id] = self.published  # it follows again
            self.unheard.discard(session_id)
            reply = {"question": question["question"], "worker": self.worker}
            self._publish_unawaited(
                question["reply_to"], json.dumps(reply | {"frames": frames_missed})
            )
            return
        if question["kind"] != "ask":
            return
        # A worker that asks follows the session from now on: events after the state
        # answered here are published again (in this same pass, before any of them).
        if session_id in self.zeros_count_after:
            self.zeros_count_after[session_id] = self.published
        self.unheard.discard(session_id)
        reply = {"question": question["question"], "running": _handlers["on_ask"](session_id)}
        self._publish_unawaited(question["reply_to"], json.dumps(reply))


class Publish(NamedTuple):
    """One PUBLISH of the bus. An event of an own turn is counted for `unheard` (its session,
    number, event); a message of the bus' own (an ask, an abort, an answer) may have a caller
    waiting for its count."""

    channel: str
    data: str
    session_id: str | None = None
    number: int = 0
    event: tuple[str, int] | None = None
    counted: asyncio.Future | None = None


def _retrieved(task: asyncio.Future) -> None:
    if not task.cancelled():
        task.exception()  # a failure here is met again by whoever asks next


def _failed(batch: list[Publish], error: Exception) -> None:
    for publish in batch:
        if publish.counted is not None and not publish.counted.done():
            publish.counted.set_exception(error)


def _bounded():
    """The publisher's time limit per command: what its socket timeout would have been.
    When it expires redis-py drops the connection (a reply half read cannot be trusted) and
    the next command opens a new one; the caller gets TimeoutError, an OSError."""
    return asyncio.timeout(settings.REDIS_SOCKET_TIMEOUT_SEC)


def _on_control_line(own: weakref.ref, message: dict) -> None:
    """On the control line's thread: an `abort` sets the turn's flag now (from any thread,
    runtime.turn.turns); everything else goes to the bus's loop."""
    if message["type"] == "message":
        channel = message["channel"].decode()
        if channel.endswith(":control"):
            body = json.loads(message["data"])
            if body["kind"] == "abort":
                _handlers["on_abort"](_session_of(channel))
                return
    _hand_over(own, ("control", message))


def _session_of(channel: str) -> str:
    """The session of an events or control channel (of the answers' channel: no session)."""
    return channel.removeprefix(PREFIX).removesuffix(":control")


def _hand_over(own: weakref.ref, item: tuple[str, Any]) -> None:
    """From the control line's thread: `item` into the bus's inbox, and one callback at the
    front of its loop's queue to empty it (unless one is on its way)."""
    bus = own()
    if bus is None:
        return
    with bus.inbox_lock:
        bus.inbox.append(item)
        if bus.inbox_called:
            return
        bus.inbox_called = True
    call_first_threadsafe(bus.loop, bus.inbox_empty)


_buses: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def bus() -> LiveBus | None:
    """This event loop's bus, or None without REDIS_URL (one process: nothing to share)."""
    if not settings.REDIS_URL:
        return None
    loop = asyncio.get_running_loop()
    found = _buses.get(loop)
    if found is None:
        found = _buses[loop] = LiveBus(settings.REDIS_URL)
    return found
