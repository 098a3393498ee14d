"""Control before data: Stop, and a new prompt, read the moment their frame arrives
(docs/design.md §26).

A frame a socket receives goes from the server's read into the socket's queue, and from
there through three passes of the worker's event loop before the consumer's receive loop
reads it: the queue's getter wakes, then the wait over the consumer's two sources, then the
consumer's task. Each pass is as long as the work that became ready meanwhile; under a
storm of streamed answers on two workers that was ~1.4 s of a 2 s Stop (docs/performance.md).

The lane looks at each frame as the server hands it to the queue, in the server's own read
callback:

- A small frame that is `{"type": "abort"}` calls `on_stop(plain, alone)` there and then:
  the consumer stops its turn if it runs on this worker (a flag, no query, no thread), and
  otherwise, for a `plain` Stop (nothing in the frame but the Stop: anything more is the
  receive loop's to check and answer), starts the Stop's control path at once (the check,
  the lease mark, the live bus to the worker that runs the turn). `alone`: nothing of this
  socket waits in the queue or is being handled. A plain Stop that came alone and that
  `on_stop` says it took is not queued; any other still goes into the queue and through the
  receive loop, in its place among the frames before it: stopping twice is stopping once.
- A frame that arrives while nothing of this socket waits in the queue or is being handled
  is offered to `take_now`, which may handle it at once (a plain prompt: its turn starts
  here). A frame it takes is not queued: the receive loop would have handled it first anyway.
  Anything else — a frame behind others, one `take_now` declines — is queued, in order.

It works where the consumer's `receive` is an `asyncio.Queue`'s `get` (Daphne, and Channels'
test communicator); elsewhere every frame takes the usual way only.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from sessions_app.core import limits

logger = logging.getLogger(__name__)

# A Stop frame is `{"type": "abort"}`; anything longer than this is not looked at for one
# (and is read by the consumer as usual), so the lane costs a length check for other frames.
STOP_FRAME_MAX_CHARS = 256
PLAIN_STOP = {"type": "abort"}
# Frames offered to `take_now` at most this long: a prompt's words, not a pasted document
# (those are checked by the receive loop, the largest in a pool thread).
TAKE_NOW_MAX_CHARS = 16 * 1024


class FrameLane:
    """Installed on one socket's queue. `pending` counts the received frames queued and not
    yet handled by the receive loop, which calls `handled()` after each."""

    def __init__(
        self,
        queue: asyncio.Queue,
        on_stop: Callable[[bool, bool], bool],
        take_now: Callable[[str], bool],
    ):
        self.on_stop = on_stop
        self.take_now = take_now
        # Whatever is queued already (frames sent while the socket opened) counts as
        # waiting: a frame taken now must never pass one of them.
        self.pending = queue.qsize()
        self._put = queue.put_nowait
        queue.put_nowait = self._arrived

    def handled(self) -> None:
        if self.pending > 0:
            self.pending -= 1

    def _arrived(self, message: dict) -> None:
        if message.get("type") == "websocket.receive":
            text = message.get("text")
            stop = stop_frame(message)
            if stop is not None:
                # Left out of the queue only when the receive loop would have nothing else
                # to do with it: nothing waits before it, and it is nothing but a Stop (a
                # frame with more in it is the receive loop's to check and answer).
                plain, alone = stop == PLAIN_STOP, self.pending == 0
                if self._call(self.on_stop, plain, alone) and plain and alone:
                    return
            elif (
                self.pending == 0
                and isinstance(text, str)
                and len(text) <= TAKE_NOW_MAX_CHARS
                and self._call(self.take_now, text)
            ):
                return
            self.pending += 1
        self._put(message)

    @staticmethod
    def _call(function, *args) -> bool:
        try:
            return bool(function(*args))
        except Exception:
            # The frame still reaches the consumer, which handles it its usual way.
            logger.exception("a frame could not be read where it arrived")
            return False


def frame_lane_install(
    receive: Callable, on_stop: Callable[[bool, bool], bool], take_now: Callable[[str], bool]
) -> FrameLane | None:
    """The lane on the socket's queue, or None when `receive` is not a queue's `get`."""
    queue = getattr(receive, "__self__", None)
    if not isinstance(queue, asyncio.Queue):
        return None
    return FrameLane(queue, on_stop, take_now)


def stop_frame(message: dict) -> dict | None:
    """The frame of a message that asks to stop the turn, parsed; None for any other."""
    if message.get("type") != "websocket.receive":
        return None
    text = message.get("text")
    if not isinstance(text, str) or len(text) > STOP_FRAME_MAX_CHARS or "abort" not in text:
        return None
    try:
        frame = limits.json_loads(text)
    except ValueError:
        return None
    return frame if isinstance(frame, dict) and frame.get("type") == "abort" else None
