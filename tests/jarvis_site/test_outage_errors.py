"""Which errors are a database outage (docs/design.md §32): the workers wait those through and
raise every other error as before."""

import sqlite3

import psycopg
import pytest
from django.db import IntegrityError, InterfaceError, OperationalError

from jarvis_site.shared.outages import database_away


def wrapped(django_error, cause):
    """What Django raises: its own class, the driver's error as the cause."""
    try:
        raise django_error(str(cause)) from cause
    except django_error as error:
        return error


@pytest.mark.parametrize(
    "error",
    [
        # The lease keeper runs the driver's cursor itself: its errors arrive unwrapped.
        psycopg.OperationalError("the connection is lost"),
        psycopg.OperationalError("consuming input failed: server closed the connection"),
        psycopg.InterfaceError("the connection is closed"),
        psycopg.errors.AdminShutdown("terminating connection due to administrator command"),
        wrapped(OperationalError, psycopg.OperationalError("connection refused")),
        InterfaceError("connection already closed"),
    ],
    ids=repr,
)
def test_a_lost_or_refused_connection_is_an_outage(error):
    assert database_away(error)


@pytest.mark.parametrize(
    "error",
    [
        wrapped(OperationalError, sqlite3.OperationalError("database is locked")),
        wrapped(IntegrityError, psycopg.errors.UniqueViolation("duplicate key")),
        psycopg.errors.UndefinedTable("relation does not exist"),
        psycopg.errors.QueryCanceled("canceling statement due to statement timeout"),
        ValueError("not a database error"),
    ],
    ids=repr,
)
def test_a_mistake_is_not_an_outage(error):
    assert not database_away(error)
