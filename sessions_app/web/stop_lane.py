"""Stop, read the moment its frame arrives (docs/design.md §26).

A frame a socket receives goes from the server's read into the socket's queue, and from
there through three passes of the worker's event loop before the consumer's receive loop
reads it: the queue's getter wakes, then the wait over the consumer's two sources, then the
consumer's task. Each pass is as long as the work that became ready meanwhile; under a
storm of streamed answers on two workers that was ~1.4 s of a 2 s Stop (docs/performance.md).

The lane looks at each frame as the server hands it to the queue, in the server's own read
callback. A small frame that is `{"type": "abort"}` stops the socket's turn there and then,
if it runs on this worker for this socket's user: a flag is set, no query, no thread. The
frame still goes into the queue and through the consumer as before (the lease mark for a
turn elsewhere, the error for a session that is gone): stopping twice is stopping once.

It works where the consumer's `receive` is an `asyncio.Queue`'s `get` (Daphne, and Channels'
test communicator); elsewhere every frame takes the usual way only.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from sessions_app.core import limits

logger = logging.getLogger(__name__)

# A Stop frame is `{"type": "abort"}`; anything longer than this is not looked at here (and
# is read by the consumer as usual), so the lane costs a length check for every other frame.
STOP_FRAME_MAX_CHARS = 256


def stop_lane_install(receive: Callable, on_stop: Callable[[], None]) -> bool:
    """Call `on_stop` for each Stop frame as it arrives, before it is queued; True when the
    socket's `receive` is a queue this can watch."""
    queue = getattr(receive, "__self__", None)
    if not isinstance(queue, asyncio.Queue):
        return False
    put = queue.put_nowait

    def put_nowait(message: dict) -> None:
        if is_stop(message):
            try:
                on_stop()
            except Exception:
                # The frame still reaches the consumer, which stops the turn its usual way.
                logger.exception("a Stop could not be read where it arrived")
        put(message)

    queue.put_nowait = put_nowait
    return True


def is_stop(message: dict) -> bool:
    """Whether a message from the server is a text frame that asks to stop the turn."""
    if message.get("type") != "websocket.receive":
        return False
    text = message.get("text")
    if not isinstance(text, str) or len(text) > STOP_FRAME_MAX_CHARS or "abort" not in text:
        return False
    try:
        frame = limits.json_loads(text)
    except ValueError:
        return False
    return isinstance(frame, dict) and frame.get("type") == "abort"
