"""Live turns anyone can join (docs/design.md §17): the running turn's state, and the delivery
of its events to the sockets of the session.

- A `LiveTurn` numbers the events of one turn (`event_seq` 1, 2, 3 … with no gap) and folds
  each into its running state: the streamed text of the step not yet stored, the tool calls
  not yet answered. Numbering, folding and handing the event to the sockets happen under one
  lock, so a socket that reads the state gets, after it, exactly the later events.
- The worker's sockets are kept per session in this process: the turn hands each event's
  frame, encoded once, to the sockets of its own worker with no channel layer in between,
  and publishes it once on the live bus (sessions_app.runtime.live.live_bus) for the other workers.
- A socket that joins is registered before it reads the state (its events wait in a
  buffer), then gets the snapshot, then the buffered events newer than the state.
- A turn keeps the frames of its events, and for RECENT_TURN_SEC after its end: a worker
  that missed some while Redis was away replays them from here (docs/design.md §32).
"""

from __future__ import annotations

import asyncio
import collections
import logging
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any

from django.utils import timezone

from jarvis_site.shared import metrics
from sessions_app.core import frames
from sessions_app.runtime.live import live_bus
from sessions_app.runtime.loop.running import running_loop
from sessions_app.runtime.turn.turns import turn_abort_local

logger = logging.getLogger(__name__)

# How long an ended turn's events stay here for a worker catching up after a Redis outage:
# longer than an outage a worker waits through without its tabs reloading.
RECENT_TURN_SEC = 120.0
# A turn keeps at most this many frames for a catch-up (deltas are coalesced, so this is a
# long answer many times over); a catch-up past them starts at the oldest kept.
REPLAY_FRAMES = 20_000


class LiveTurn:
    """One running turn as every socket of its session sees it."""

    def __init__(self, session_id: str, turn_id: str):
        self.session_id = session_id
        self.turn_id = turn_id
        self.started_at = timezone.now().isoformat()
        self.event_seq = 0
        self.text = ""
        self.tools: dict[str, dict[str, Any]] = {}
        self.entry_seq = 0  # the last stored entry whose event was numbered
        self.lock = threading.Lock()
        # (event_seq, frame text) of its events, for a worker catching up (under `lock`).
        self.frames: collections.deque[tuple[int, str]] = collections.deque(maxlen=REPLAY_FRAMES)
        self.ended_at: float | None = None

    def frames_after(self, after: int) -> list[tuple[str, int, str]]:
        with self.lock:
            return [(self.turn_id, seq, text) for seq, text in self.frames if seq > after]

    def _fold(self, event: dict[str, Any]) -> None:
        kind = event["type"]
        if kind == "delta":
            self.text += event["text"]
        elif kind == "entry":
            entry = event["entry"]
            self.entry_seq = max(self.entry_seq, entry["seq"])
            if entry.get("role") == "assistant":
                self.text = ""  # stored: the snapshot's entries carry it now
                now = timezone.now().isoformat()
                for call in entry.get("tool_calls") or []:
                    self.tools[call["id"]] = {
                        "call_id": call["id"],
                        "name": call["name"],
                        "arguments": call["arguments"],
                        "started_at": now,
                    }
            elif entry.get("role") == "tool":
                self.tools.pop(entry.get("tool_call_id"), None)

    def state(self) -> dict[str, Any]:
        """`running` of the snapshot (call under `lock`)."""
        return {
            "turn_id": self.turn_id,
            "started_at": self.started_at,
            "event_seq": self.event_seq,
            "text": self.text,
            "tools": list(self.tools.values()),
            "entry_seq": self.entry_seq,
        }


class LiveSocket:
    """A socket's place among its session's sockets in this worker.

    Until `go_live`, events wait in `pending`: the socket is reading the snapshot."""

    def __init__(
        self,
        session_id: str,
        send: Callable[[str], Awaitable[None]],
        write_now: Callable[[], None] | None = None,
        send_now: Callable[[str], bool] | None = None,
    ):
        self.session_id = session_id
        self.send = send
        # Writes what the socket holds at once: for a turn's end (runtime.loop.socket_writes).
        self.write_now = write_now
        # Hands a frame to the open socket's protocol without `send`'s layers; False when
        # the socket is not open, and `send` then does what it does with a closing one.
        self.send_now = send_now
        self.loop = asyncio.get_running_loop()
        self.pending: list[tuple[str, int, str]] | None = []
        # The snapshot's turn and event_seq: its events up to there are in the snapshot.
        self.snapshot_holds: tuple[str, int] | None = None

    async def deliver(self, turn_id: str, event_seq: int, text: str) -> None:
        if self.pending is not None:
            self.pending.append((turn_id, event_seq, text))
            return
        if self._in_snapshot(turn_id, event_seq):
            # From another worker, an event can arrive after the state that holds it: the
            # answer to `ask` and the events leave that worker on different connections.
            return
        try:
            await self._send(text)
            if self.write_now is not None and frames.is_turn_end(text):
                self.write_now()
        except Exception:  # noqa: BLE001 - a socket going away must not stop the others
            logger.debug("a live event could not reach a closing socket", exc_info=True)

    async def go_live(self, running: dict[str, Any] | None) -> None:
        """Send what arrived while the snapshot was read, minus what the snapshot holds (also
        later: see `deliver`)."""
        if running:
            self.snapshot_holds = (running["turn_id"], running["event_seq"])
        while self.pending:
            batch, self.pending = self.pending, []
            for turn_id, event_seq, text in batch:
                if not self._in_snapshot(turn_id, event_seq):
                    await self._send(text)
        self.pending = None

    async def _send(self, text: str) -> None:
        if self.send_now is not None:
            try:
                if self.send_now(text):
                    return
            except Exception:  # noqa: BLE001 - the usual way meets it again, and ends the consumer
                pass
        await self.send(text)

    def _in_snapshot(self, turn_id: str, event_seq: int) -> bool:
        holds = self.snapshot_holds
        return holds is not None and turn_id == holds[0] and event_seq <= holds[1]


_lock = threading.Lock()
_sockets: dict[str, set[LiveSocket]] = {}
_turns: dict[str, LiveTurn] = {}
_ended: dict[str, LiveTurn] = {}  # turn id -> a turn of this worker that ended lately


async def _deliver_here(session_id: str, turn_id: str, event_seq: int, text: str) -> None:
    with _lock:
        sockets = list(_sockets.get(session_id, ()))
    loop = running_loop()  # for every frame: without asyncio's system call
    for socket in sockets:
        if socket.loop is loop:
            await socket.deliver(turn_id, event_seq, text)
        elif socket.loop.is_closed():
            # Its loop ended without the socket leaving (a test's loop): nobody reads it.
            with _lock:
                _sockets.get(session_id, set()).discard(socket)
        else:
            # A turn run by a synchronous caller (a test, a command) has a loop of its own.
            asyncio.run_coroutine_threadsafe(socket.deliver(turn_id, event_seq, text), socket.loop)


# --- the turn's side ---------------------------------------------------------------------------


def turn_starting(*, session_id: str) -> None:
    """A turn of the session is starting on this worker: other workers' questions about it
    start to arrive here already (see `turn_begin`; never waits)."""
    bus = live_bus.bus()
    if bus is not None:
        bus.turn_starting(session_id)


async def turn_not_started(*, session_id: str) -> None:
    """The turn announced by `turn_starting` never reached its first event."""
    bus = live_bus.bus()
    if bus is not None:
        await bus.turn_not_started(session_id)


async def turn_begin(*, session_id: str, turn_id: str) -> LiveTurn:
    """Make the turn joinable, before its first event is numbered: other workers can ask
    for its state and abort it once the bus has confirmed its control subscription (its
    events are published from then on; this worker's sockets get them at once)."""
    turn = LiveTurn(session_id, turn_id)
    with _lock:
        _turns[session_id] = turn
    bus = live_bus.bus()
    if bus is not None:
        bus.turn_started(session_id)
    return turn


async def turn_event(turn: LiveTurn, event: dict[str, Any]) -> None:
    """Number the event, fold it into the running state, and hand it to every socket of the
    session: this worker's directly, the others' through one publish."""
    with turn.lock:
        turn.event_seq += 1
        event = {**event, "turn_id": turn.turn_id, "event_seq": turn.event_seq}
        turn._fold(event)
        text = frames.frame_text(event)
        turn.frames.append((turn.event_seq, text))
    bus = live_bus.bus()
    if bus is not None:
        bus.publish_event(turn.session_id, turn.turn_id, event["event_seq"], text)
    await _deliver_here(turn.session_id, turn.turn_id, event["event_seq"], text)
    metrics.EVENTS_SENT.inc()


async def turn_finish(turn: LiveTurn) -> None:
    """The turn sent its last event: nobody can join it any more."""
    now = time.monotonic()
    with _lock:
        if _turns.get(turn.session_id) is turn:
            del _turns[turn.session_id]
        turn.ended_at = now
        _ended[turn.turn_id] = turn
        for turn_id in [t for t, old in _ended.items() if now - old.ended_at > RECENT_TURN_SEC]:
            del _ended[turn_id]
    bus = live_bus.bus()
    if bus is not None:
        await bus.turn_ended(turn.session_id)


# --- the socket's side -------------------------------------------------------------------------


async def socket_join(socket: LiveSocket) -> dict[str, Any] | None:
    """Register the socket (its events wait until `go_live`) and return the running state
    of its session's turn, wherever it runs: None when no turn runs."""
    with _lock:
        _sockets.setdefault(socket.session_id, set()).add(socket)
    bus = live_bus.bus()
    if bus is not None:
        await bus.follow(socket.session_id)
    return await running_state(session_id=socket.session_id)


async def socket_leave(socket: LiveSocket) -> None:
    with _lock:
        sockets = _sockets.get(socket.session_id)
        if sockets is None or socket not in sockets:
            return
        sockets.discard(socket)
        if not sockets:
            del _sockets[socket.session_id]
    bus = live_bus.bus()
    if bus is not None:
        await bus.unfollow(socket.session_id)


def _running_here(session_id: str) -> dict[str, Any] | None:
    with _lock:
        turn = _turns.get(session_id)
    if turn is None:
        return None
    with turn.lock:
        return turn.state()


async def running_state(*, session_id: str) -> dict[str, Any] | None:
    """The running turn's state: this worker's own, else the one of the worker running it."""
    running = _running_here(session_id)
    if running is not None:
        return running
    bus = live_bus.bus()
    if bus is None:
        return None
    return await bus.ask(session_id)


# --- what arrives from other workers -----------------------------------------------------------


async def abort_elsewhere(*, session_id: str) -> bool:
    """Stop the session's turn on the worker that runs it, through the live bus at once;
    False without a bus or when no worker runs it."""
    bus = live_bus.bus()
    return bus is not None and await bus.abort(session_id)


def _replay(session_id: str, turn_id: str | None, after: int) -> list[tuple[str, int, str]]:
    """For a worker catching up (live_bus): the events of turn `turn_id` after `after` that
    this worker still has, then those of the session's turn running here if it is another."""
    with _lock:
        running = _turns.get(session_id)
        asked = running if running is not None and running.turn_id == turn_id else None
        if asked is None and turn_id is not None:
            ended = _ended.get(turn_id)
            asked = ended if ended is not None and ended.session_id == session_id else None
    replayed = asked.frames_after(after) if asked is not None else []
    if running is not None and running is not asked:
        replayed += running.frames_after(0)
    return replayed


live_bus.handlers_set(
    on_event=_deliver_here,
    on_ask=_running_here,
    on_abort=lambda session_id: turn_abort_local(session_id=session_id),
    on_replay=_replay,
)
