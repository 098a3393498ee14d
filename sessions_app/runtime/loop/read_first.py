"""Control before data: a socket's frame read as it arrives, not at the loop's next pass
(docs/design.md §26).

The server reads a WebSocket when its event loop's selector finds it readable, and the
selector is asked once per pass of the loop, after every callback that was ready when the
pass began. Under a storm of streamed answers a pass is hundreds of callbacks (model pieces
read, frames written) and takes 0.1–0.5 s: a Stop, or a person's new prompt, sat in the
kernel's buffer for that long before anything of the worker saw it (docs/performance.md).

A thread of the worker watches the sockets of its WebSocket connections, and nothing else
(not the model's streams, not the database, not Redis). When one becomes readable, it puts
the loop's own read of that socket at the front of the loop's ready queue
(`loop_lane.call_first_threadsafe`): the frame is read after the callback running now, in
the pass under way, and goes where every frame goes (Daphne, the socket's frame lane, its
receive loop). The read is the one the selector would have made: a read finding nothing
(the selector's pass got there first) returns at once.

Each socket is watched once at a time (`EPOLLONESHOT`) and watched again by the thread
`REARM_SEC` after its read: a client sending without pause gets at most one read ahead of
the others in that time, never a lane of its own. Not "one pass later": the starts of a
burst's turns go ahead of the pass too (loop_lane), and a pass that ends only after hundreds
of them left a socket read at the burst's start unwatched when its Stop came half a second
later. A socket whose reading the server has paused is not watched again until its
connection ends.

Only Daphne's plain TCP transport has a socket to watch (`scope`'s server is Daphne when
its `send` is `partial(server.handle_reply, protocol)`); on Linux only (`select.epoll`).
Anywhere else every frame is read the usual way.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import select
import threading
import time
from collections import deque
from collections.abc import Callable

from sessions_app.runtime.loop.loop_lane import call_first_threadsafe
from sessions_app.runtime.loop.socket_writes import daphne_protocol

_ONE_READ = getattr(select, "EPOLLIN", 0) | getattr(select, "EPOLLONESHOT", 0)
# The watcher looks this often whether its loop has closed (a test's loop; a server's ends
# with its process), and then ends.
CLOSED_LOOK_SEC = 1.0
# A socket read at the front is watched again this long after its read.
REARM_SEC = 0.02


class _Watcher:
    """One per event loop: a thread waiting on an epoll set of the loop's WebSocket sockets."""

    def __init__(self, loop: asyncio.AbstractEventLoop):
        self.loop = loop
        self.epoll = select.epoll()
        self.lock = threading.Lock()
        # Descriptor -> the connection watching it. A connection's socket is closed by the
        # server (the kernel then drops it from the set) before its application ends, and
        # the number may be reused by a new connection: only its owner forgets it.
        self.owners: dict[int, object] = {}
        # Sockets read at the front, oldest first, each with when to watch it again.
        self.rearm: deque[tuple[float, int]] = deque()
        # Wakes the thread when a socket is to be watched again and it sleeps for longer.
        self.wake = os.eventfd(0, os.EFD_NONBLOCK)
        self.epoll.register(self.wake, select.EPOLLIN)
        self.closed = False
        self.thread = threading.Thread(target=self._watch, name="jarvis-read-first", daemon=True)
        self.thread.start()

    def watch(self, fd: int, owner: object) -> None:
        with self.lock:
            self.owners[fd] = owner
            try:
                self.epoll.register(fd, _ONE_READ)
            except FileExistsError:  # a closed owner's number, not dropped yet
                self.epoll.modify(fd, _ONE_READ)

    def forget(self, fd: int, owner: object) -> None:
        with self.lock:
            if self.owners.get(fd) is not owner:
                return
            del self.owners[fd]
            with contextlib.suppress(OSError):  # closed already: the kernel dropped it
                self.epoll.unregister(fd)

    def _watch(self) -> None:
        while not self.closed:
            try:
                ready = self.epoll.poll(self._watch_again_due())
            except InterruptedError:
                continue
            except (OSError, ValueError):
                return  # the set is closed
            for fd, _events in ready:
                if fd == self.wake:
                    with contextlib.suppress(OSError):
                        os.eventfd_read(self.wake)
                    continue
                call_first_threadsafe(self.loop, self._read_now, fd)
            if self.loop.is_closed():
                self.close()

    def _watch_again_due(self) -> float:
        """Watch again the sockets whose time has come; how long until the next one."""
        now = time.monotonic()
        with self.lock:
            if self.closed:
                return CLOSED_LOOK_SEC  # the poll then ends the thread
            while self.rearm and self.rearm[0][0] <= now:
                _, fd = self.rearm.popleft()
                if fd in self.owners:
                    with contextlib.suppress(OSError):  # closed meanwhile
                        self.epoll.modify(fd, _ONE_READ)
            return min(CLOSED_LOOK_SEC, self.rearm[0][0] - now) if self.rearm else CLOSED_LOOK_SEC

    def _read_now(self, fd: int) -> None:
        """On the loop, at the front of its queue: the read the selector would make."""
        with self.lock:
            if fd not in self.owners:
                return
        selector = getattr(self.loop, "_selector", None)
        try:
            key = selector.get_key(fd)
        except (AttributeError, KeyError, ValueError):
            return  # the loop does not read it now: closing
        reader = key.data[0] if isinstance(key.data, tuple) else None
        if reader is None or reader.cancelled():
            return  # the server paused its reading: the usual way from now on
        reader._run()  # the selector's own callback, with the loop's handling of errors
        with self.lock:
            if self.closed:
                return
            idle = not self.rearm  # the thread may sleep up to CLOSED_LOOK_SEC
            self.rearm.append((time.monotonic() + REARM_SEC, fd))
            if idle:
                with contextlib.suppress(OSError):
                    os.eventfd_write(self.wake, 1)

    def close(self) -> None:
        with self.lock:
            if self.closed:
                return  # the eventfd's number may be another file's by now
            self.closed = True
            self.owners.clear()
            self.rearm.clear()
            self.epoll.close()
            os.close(self.wake)


_watchers: dict[asyncio.AbstractEventLoop, _Watcher] = {}
_watchers_lock = threading.Lock()


def _watcher_for(loop: asyncio.AbstractEventLoop) -> _Watcher | None:
    if not hasattr(select, "epoll") or not hasattr(loop, "_selector"):
        return None
    with _watchers_lock:
        for stale in [other for other in _watchers if other.is_closed()]:
            _watchers.pop(stale).close()
        watcher = _watchers.get(loop)
        if watcher is None:
            watcher = _watchers[loop] = _Watcher(loop)
        return watcher


def socket_fd_for(send: Callable) -> int | None:
    """The descriptor of Daphne's plain TCP socket behind `send`, else None."""
    transport = getattr(daphne_protocol(send), "transport", None)
    if transport is None:
        return None
    from twisted.internet.tcp import Server  # Daphne's; not imported by a test without it

    if not isinstance(transport, Server):  # TLS, another server's, a test's
        return None
    try:
        fd = transport.fileno()
    except Exception:  # noqa: BLE001 - closed already
        return None
    return fd if isinstance(fd, int) and fd >= 0 else None


class ReadFirst:
    """ASGI middleware of the WebSocket routes: the connection's socket is watched while its
    application runs (see the module)."""

    def __init__(self, application):
        self.application = application

    async def __call__(self, scope, receive, send):
        fd = socket_fd_for(send)
        watcher = _watcher_for(asyncio.get_running_loop()) if fd is not None else None
        if watcher is None:
            return await self.application(scope, receive, send)
        owner = object()
        watcher.watch(fd, owner)
        try:
            return await self.application(scope, receive, send)
        finally:
            watcher.forget(fd, owner)
