"""Request headers are stored once per distinct value (docs/design.md §20), and a process
that has seen a header stored does not ask the database again: every turn sends one."""

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from sessions_app.models import RequestHeader
from sessions_app.store.request_headers import header_digest, header_get, header_save

pytestmark = pytest.mark.django_db(transaction=True)

HEADER = {"system": "You are Jarvis.", "tools": [], "parameters": {}, "thinking": "off"}


def header_queries(action) -> list[str]:
    with CaptureQueriesContext(connection) as captured:
        action()
    return [query["sql"] for query in captured if "requestheader" in query["sql"]]


def test_a_header_once_stored_is_not_looked_up_again():
    digest = header_digest(HEADER)
    assert header_queries(lambda: header_save(HEADER, digest))  # looked up, then stored
    assert header_get(digest) == HEADER
    assert header_queries(lambda: header_save(HEADER, digest)) == []
    assert RequestHeader.objects.count() == 1


def test_a_save_rolled_back_is_not_remembered():
    digest = header_digest(HEADER)
    with pytest.raises(RuntimeError), transaction.atomic():
        header_save(HEADER, digest)
        raise RuntimeError("the turn's start failed")
    assert not RequestHeader.objects.exists()
    # The next turn stores it: nothing remembered a row that never was.
    assert header_queries(lambda: header_save(HEADER, digest))
    assert header_get(digest) == HEADER
