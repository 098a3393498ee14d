"""Session ids (docs/design.md §6): the one place that says what an id may be.

Every entry point — API, WebSocket, store, management commands — validates through
`validate_session_id`, so an id that could escape the jsonl directory or confuse a URL
never reaches storage.
"""

import hashlib
import itertools
import os
import random
import re
import secrets
import threading
import time

from django.conf import settings

from jarvis_site.shared.errors import Code, DomainError

SESSION_ID_RE = re.compile(r"[A-Za-z0-9_.:\-]{1,200}")
SAFE_FILENAME_RE = re.compile(r"[^A-Za-z0-9_\-]")
# Sub-agent sessions (sessions_app.runtime.turn.agents) have ids only the platform makes: a user who could
# create one could take another conversation's sub-agent session before it exists.
SUBAGENT_PREFIX = "agent_"


class InvalidSessionId(DomainError, ValueError):
    """The id breaks docs/design.md §6; the API answers 400, the WebSocket closes with 4400."""

    code = Code.BAD_ID


class ReservedSessionId(InvalidSessionId):
    """A user asked to create a session with a sub-agent's id (400 `reserved_id`, close 4400)."""

    code = Code.RESERVED_ID


def validate_session_id(session_id: object) -> str:
    if not isinstance(session_id, str) or not SESSION_ID_RE.fullmatch(session_id):
        raise InvalidSessionId(
            f"a session id is 1-200 characters of A-Z a-z 0-9 _ . : - (got {session_id!r:.80})"
        )
    if session_id.startswith("."):
        raise InvalidSessionId(f"a session id may not start with '.' (got {session_id!r:.80})")
    return session_id


def is_reserved(session_id: str) -> bool:
    """Whether an id is one only the platform makes (a sub-agent session's)."""
    return session_id.startswith(SUBAGENT_PREFIX)


def reserved_refuse(session_id: str) -> ReservedSessionId:
    return ReservedSessionId(
        f"ids starting with {SUBAGENT_PREFIX!r} are made by the server for sub-agent sessions "
        f"(got {session_id!r:.80})"
    )


_counter_lock = threading.Lock()
_last_stamp = 0
_sequence = itertools.count()


# Tokens that must be unique, not secret, come from a generator seeded once from the kernel.
# `uuid4` reads the kernel's random source at every call, a system call that lets go of the
# interpreter's lock: on a loaded worker the event loop's thread then waits up to a switch
# interval (5 ms) to take it back, once per model request (docs/performance.md).
_tokens = random.Random()
# A process forked after this import would draw the same tokens as its parent: reseeded there.
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_tokens.seed)


def unique_token(bits: int = 48) -> str:
    """`bits` random bits in hex, zero-padded: unique, not for secrets."""
    return f"{_tokens.getrandbits(bits):0{(bits + 3) // 4}x}"


def new_session_id() -> str:
    """A unique id whose string order is creation order (millisecond stamp + counter + random)."""
    global _last_stamp, _sequence
    with _counter_lock:
        stamp = time.time_ns() // 1_000_000
        if stamp <= _last_stamp:
            stamp = _last_stamp
        else:
            _sequence = itertools.count()
        _last_stamp = stamp
        serial = next(_sequence)
    return f"s{stamp:013d}-{serial:04d}-{secrets.token_hex(4)}"


def is_test_session(session_id: str) -> bool:
    return session_id.startswith(tuple(settings.TEST_SESSION_PREFIXES))


def safe_filename(session_id: str) -> str:
    """Export file stem: every character outside A-Z a-z 0-9 _ - becomes '_'."""
    return SAFE_FILENAME_RE.sub("_", session_id)


def group_name(session_id: str) -> str:
    """The channel-layer group of a session ("session.<id>").

    Channels allows only A-Z a-z 0-9 - _ . in group names and fewer than 100 characters, so
    ':' is escaped and long ids are shortened with a hash that keeps them distinct.
    """
    escaped = session_id.replace("_", "__").replace(":", "_c")
    name = f"session.{escaped}"
    if len(name) > 90:
        digest = hashlib.sha256(session_id.encode()).hexdigest()[:16]
        name = f"session.{escaped[:60]}.{digest}"
    return name
