"""Notices made in another process, brought to this process's sockets.

Without REDIS_URL the channel layer lives in one process: a notice that the task worker (a
process of its own) stores cannot reach a socket through it. One watcher per event loop looks
for the notices of every session that has a socket here, in one read every NOTICE_POLL_SEC,
and hands each socket those of its session; the socket shows each notice once. (A poll per
socket did the same with one query per socket: at 200 open sockets, 400 queries a second that
kept the worker's database thread, and the interpreter lock its event loop needs, busy.)
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from typing import Protocol

from channels.db import database_sync_to_async

from sessions_app import selectors

logger = logging.getLogger(__name__)

NOTICE_POLL_SEC = 0.5


class NoticeReceiver(Protocol):
    """A socket as the watcher sees it (the session consumer)."""

    session_id: str
    user_id: int

    async def notice_found(self, notice: dict) -> None: ...


class _Watcher:
    def __init__(self):
        self.sockets: dict[str, set[NoticeReceiver]] = {}
        self.task: asyncio.Task | None = None

    def add(self, socket: NoticeReceiver) -> None:
        self.sockets.setdefault(socket.session_id, set()).add(socket)
        if self.task is None or self.task.done():
            self.task = asyncio.get_running_loop().create_task(self._run())

    def remove(self, socket: NoticeReceiver) -> None:
        sockets = self.sockets.get(socket.session_id)
        if sockets is not None:
            sockets.discard(socket)
            if not sockets:
                del self.sockets[socket.session_id]

    async def _run(self) -> None:
        while self.sockets:
            await asyncio.sleep(NOTICE_POLL_SEC)
            try:
                await self._poll()
            except Exception:
                # One failed read (a database restarting) must not stop notices for good.
                logger.exception("looking for new notices failed")

    async def _poll(self) -> None:
        # Asked as each socket's user: a session deleted and created again by another user
        # while a socket of the first hangs on shows that socket nothing. Sockets of one
        # session have one user but in that case, so this is one read nearly always.
        users = {
            session_id: {socket.user_id for socket in sockets}
            for session_id, sockets in self.sockets.items()
        }
        while users:
            asked = {session_id: pending.pop() for session_id, pending in users.items()}
            users = {session_id: pending for session_id, pending in users.items() if pending}
            found = await database_sync_to_async(selectors.notices_of_sockets)(sessions=asked)
            for session_id, notices in found.items():
                for socket in list(self.sockets.get(session_id, ())):
                    if socket.user_id == asked[session_id]:
                        for notice in notices:
                            await socket.notice_found(notice)


_watchers: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Watcher] = (
    weakref.WeakKeyDictionary()
)


def _watcher() -> _Watcher:
    loop = asyncio.get_running_loop()
    watcher = _watchers.get(loop)
    if watcher is None:
        watcher = _watchers[loop] = _Watcher()
    return watcher


def notices_watch(socket: NoticeReceiver) -> None:
    """Start handing `socket` the new notices of its session."""
    _watcher().add(socket)


def notices_unwatch(socket: NoticeReceiver) -> None:
    _watcher().remove(socket)
