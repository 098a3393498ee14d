"""What every log line says about where it comes from (docs/design.md §19).

`request_id`, `user_id`, `session_id` and `turn_id` live in context variables: the HTTP
middleware below sets the first two for a request, the WebSocket consumer for a socket, the
turn runner the last three for a turn. Context variables follow the code into tasks, into
`sync_to_async` threads and into the turn's thread pools (runtime.loop.executors), so a line
logged anywhere on a request's path carries them, with no argument passed along.

The lines themselves are JSON (python-json-logger) or plain text for a console
(LOG_FORMAT); jarvis_site.settings.LOGGING wires both. No log call passes message text:
what a person or a model wrote stays in the session store.
"""

from __future__ import annotations

import logging
import re
import time
import uuid
from contextlib import contextmanager
from contextvars import ContextVar

from django.utils.functional import LazyObject, empty
from pythonjsonlogger.json import JsonFormatter

from jarvis_site.shared.middleware import SyncAndAsyncMiddleware

FIELDS = ("request_id", "user_id", "session_id", "turn_id")
_context: dict[str, ContextVar] = {name: ContextVar(name, default=None) for name in FIELDS}

# A request id a proxy sends along is kept (so its log and ours line up) if it looks like one.
REQUEST_ID_HEADER = "X-Request-ID"
_REQUEST_ID = re.compile(r"[A-Za-z0-9._-]{1,64}")

access_logger = logging.getLogger("jarvis_site.access")


def log_context_set(**values) -> None:
    """Set some of FIELDS for the rest of the current context (task, request, turn)."""
    for name, value in values.items():
        _context[name].set(value)


@contextmanager
def log_context(**values):
    """Set some of FIELDS for the duration of a block."""
    tokens = [(_context[name], _context[name].set(value)) for name, value in values.items()]
    try:
        yield
    finally:
        for var, token in reversed(tokens):
            var.reset(token)


def new_request_id() -> str:
    return uuid.uuid4().hex


class ContextFilter(logging.Filter):
    """Copies the context variables onto every record a handler emits."""

    def filter(self, record: logging.LogRecord) -> bool:
        for name, var in _context.items():
            if not hasattr(record, name):
                setattr(record, name, var.get())
        return True


class JsonLinesFormatter(JsonFormatter):
    """python-json-logger's formatter, leaving out the context fields that are not known."""

    def process_log_record(self, log_data: dict) -> dict:
        return {key: value for key, value in log_data.items() if value is not None}


class TextFormatter(logging.Formatter):
    """Plain lines for a console, the known context fields in brackets after the logger's
    name (`%(context)s` in the format)."""

    def formatMessage(self, record: logging.LogRecord) -> str:
        known = [
            f"{name}={getattr(record, name)}" for name in FIELDS if getattr(record, name, None)
        ]
        record.context = f" [{' '.join(known)}]" if known else ""
        return super().formatMessage(record)


class RequestContextMiddleware(SyncAndAsyncMiddleware):
    """Gives every HTTP request an id (kept from X-Request-ID when a proxy sent one, echoed
    back in the answer) and logs one access line per request: method, path without its query
    (a search query is the person's words), status, duration and the authenticated user."""

    def call(self, request):
        request_id, started = _request_started(request)
        with log_context(request_id=request_id, user_id=None, session_id=None, turn_id=None):
            response = self.get_response(request)
            user = getattr(request, "user", None)
            _log_access(request, response, started, _user_id(user))
        response[REQUEST_ID_HEADER] = request_id
        return response

    async def acall(self, request):
        request_id, started = _request_started(request)
        with log_context(request_id=request_id, user_id=None, session_id=None, turn_id=None):
            response = await self.get_response(request)
            _log_access(request, response, started, _user_id(await _auser(request)))
        response[REQUEST_ID_HEADER] = request_id
        return response


def _request_started(request) -> tuple[str, float]:
    sent = request.headers.get(REQUEST_ID_HEADER, "")
    request_id = sent if _REQUEST_ID.fullmatch(sent) else new_request_id()
    return request_id, time.monotonic()


async def _auser(request):
    """The request's user without a database read on the event loop: the one a view already
    looked up (DRF sets request.user when it authenticates), else Django's async lookup."""
    user = getattr(request, "user", None)
    if isinstance(user, LazyObject) and user._wrapped is empty:
        auser = getattr(request, "auser", None)
        return await auser() if auser is not None else None
    return user


def _user_id(user) -> int | None:
    # DRF authenticates tokens inside the view, and sets request.user when it does.
    return user.pk if user is not None and user.is_authenticated else None


def _log_access(request, response, started: float, user_id: int | None) -> None:
    fields = {
        "method": request.method,
        "path": request.path,
        "status": response.status_code,
        "duration_ms": round((time.monotonic() - started) * 1000, 1),
    }
    # The message reads on a console; the same values are fields of a JSON line.
    access_logger.info(
        "%(method)s %(path)s %(status)s %(duration_ms)s ms",
        fields,
        extra={"user_id": user_id, **fields},
    )
