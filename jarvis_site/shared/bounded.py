"""A function run on untrusted bytes in a child process with CPU, memory and time limits
(docs/design.md §27).

Parsers that can be made slow or large by what they read — a PDF's text, an image's
decode — must never run unbounded in a server process: one request could hold the
interpreter's lock for minutes or raise the worker by gigabytes. `run_bounded` starts
`python -m jarvis_site.shared.bounded_child <module:function>` in a session (process group)
of its own; the child sets its CPU and address-space limits on itself before it imports the
function (the parent runs threads, so nothing runs between fork and exec), and dies with
the thread that started it. The parent feeds the bytes on stdin, reads what the function
writes on stdout, and kills the whole group when the wall clock runs out. What the function
wrote before it was stopped is kept: a reader that writes as it goes keeps its progress.

A child started for an HTTP request also dies with the request: `RequestChildrenMiddleware`
kills the children of a request whose client went away (Django cancels the request then, but
the view's thread would go on waiting for its child).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path

from jarvis_site.shared.middleware import SyncAndAsyncMiddleware

# The project's root, so the child imports the same code whatever the server's directory.
PROJECT_ROOT = Path(__file__).resolve().parents[2]
# The child's exit status when the function ran out of memory (MemoryError).
EXIT_MEMORY = 3
STDERR_MAX_CHARS = 2000


@dataclass(frozen=True)
class Limits:
    cpu_sec: int
    wall_sec: float
    memory_bytes: int


@dataclass(frozen=True)
class BoundedResult:
    output: bytes
    # None when the function returned; else why it was stopped: "cpu", "wall", "memory", or
    # "error" (an exception: `error` holds its last line).
    stopped: str | None
    error: str = ""


class RequestChildren:
    """The bounded children one request started. Once the request has ended (`close`), a
    child it still starts is killed at once: the view's thread does not know it ended."""

    def __init__(self):
        self._lock = threading.Lock()
        self._children: set[subprocess.Popen] = set()
        self._closed = False

    def add(self, child: subprocess.Popen) -> None:
        with self._lock:
            if not self._closed:
                self._children.add(child)
                return
        _kill_group(child)

    def discard(self, child: subprocess.Popen) -> None:
        with self._lock:
            self._children.discard(child)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            children, self._children = self._children, set()
        for child in children:
            _kill_group(child)


# Set by the middleware on the event loop; asgiref copies the context into the view's thread,
# so both see the same object.
_request_children: ContextVar[RequestChildren | None] = ContextVar(
    "bounded_request_children", default=None
)


class RequestChildrenMiddleware(SyncAndAsyncMiddleware):
    """Kills the bounded children of a request its client left (docs/design.md §27)."""

    def call(self, request):
        return self.get_response(request)  # WSGI and the test client: no early end to see

    async def acall(self, request):
        children = RequestChildren()
        token = _request_children.set(children)
        try:
            return await self.get_response(request)
        except asyncio.CancelledError:
            children.close()
            raise
        finally:
            _request_children.reset(token)


def run_bounded(target: str, data: bytes, limits: Limits, **params) -> BoundedResult:
    """Call `target` ("package.module:function") as `function(data, out, **params)` in a
    bounded child; `out` is its binary stdout. Never raises for what the child did."""
    command = [
        sys.executable,
        "-m",
        "jarvis_site.shared.bounded_child",
        target,
        json.dumps(params),
        str(limits.cpu_sec),
        str(limits.memory_bytes),
    ]
    env = {**os.environ, "PYTHONPATH": str(PROJECT_ROOT)}
    child = subprocess.Popen(
        command,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
        env=env,
        cwd=PROJECT_ROOT,
    )
    request = _request_children.get()
    if request is not None:
        request.add(child)
    try:
        output, errors = child.communicate(data, timeout=limits.wall_sec)
        timed_out = False
    except subprocess.TimeoutExpired:
        _kill_group(child)
        output, errors = child.communicate()
        timed_out = True
    except BaseException:
        # The request's thread is stopped (the server shuts down): the reader goes with it.
        _kill_group(child)
        child.wait()
        raise
    finally:
        if request is not None:
            request.discard(child)
    return BoundedResult(output, *_why_stopped(child.returncode, errors, timed_out))


def _kill_group(child: subprocess.Popen) -> None:
    try:
        os.killpg(child.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _why_stopped(returncode: int, errors: bytes, timed_out: bool) -> tuple[str | None, str]:
    if timed_out:
        return "wall", ""
    if returncode == 0:
        return None, ""
    if returncode in (-signal.SIGXCPU, -signal.SIGKILL):
        return "cpu", ""  # the soft CPU limit sends SIGXCPU, the hard one SIGKILL
    if returncode == EXIT_MEMORY:
        return "memory", ""
    lines = errors.decode("utf-8", "replace").strip().splitlines()
    return "error", (lines[-1] if lines else f"exit status {returncode}")[:STDERR_MAX_CHARS]
