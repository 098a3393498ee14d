"""Telling an outage from a mistake (docs/design.md §32).

An error that says Redis or PostgreSQL cannot be reached now is waited through: the worker
keeps what it has and tries again once the server is back. Anything else (a constraint, a
syntax error, a lock the database gave up on) is a mistake, and is raised as it always was.
"""

from __future__ import annotations

import psycopg
import redis
from django.db import InterfaceError, OperationalError

# PostgreSQL's SQLSTATEs of a server that is going, gone or not yet back: class 08 (connection
# exception), and the operator's shutdown, a crash's, and a server still starting.
_SERVER_GONE_STATES = ("57P01", "57P02", "57P03")
REDIS_AWAY_ERRORS = (redis.ConnectionError, redis.TimeoutError, OSError)


def redis_away(error: BaseException) -> bool:
    """Whether `error` says that Redis cannot be reached (not that a command was wrong)."""
    return isinstance(error, REDIS_AWAY_ERRORS)


def database_away(error: BaseException) -> bool:
    """Whether `error` says that the database cannot be reached now. Django wraps the driver's
    error (the driver's is its `__cause__`); code that runs the driver's cursor itself, as the
    lease keeper does, meets the driver's error unwrapped."""
    if isinstance(error, InterfaceError | psycopg.InterfaceError):
        return True  # "connection already closed": the server went away under it
    if isinstance(error, OperationalError):
        error = error.__cause__
    if not isinstance(error, psycopg.OperationalError):
        return False  # SQLite's "database is locked" and its kin are not outages
    state = error.sqlstate
    return state is None or state.startswith("08") or state in _SERVER_GONE_STATES
