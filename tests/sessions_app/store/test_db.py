"""What only the db backend can get wrong: which SQL it sends (docs/design.md §3, §4)."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from sessions_app.models import Entry
from sessions_app.store import NewEntry
from sessions_app.store.db import DbSessionStore

pytestmark = pytest.mark.django_db


def test_list_never_selects_entry_bodies():
    store = DbSessionStore()
    for number in range(50):
        session_id = f"s{number:02d}"
        store.create(session_id)
        store.append(
            session_id,
            [NewEntry(role="user", content="q" * 200), NewEntry(role="assistant", content="a")],
        )
    entry_table = Entry._meta.db_table

    with CaptureQueriesContext(connection) as queries:
        listed = store.list()
        store.list(agent="jarvis", include_tests=False)
        store.list(owner_id=1)

    assert len(listed) == 50
    assert len(queries.captured_queries) == 3  # one query per listing, not one per session
    for query in queries.captured_queries:
        assert entry_table not in query["sql"], query["sql"]


def test_branch_copies_entries_server_side_in_one_statement():
    store = DbSessionStore()
    store.create("source")
    store.append("source", [NewEntry(role="user", content=f"m{n}") for n in range(200)])
    entry_table = Entry._meta.db_table

    with CaptureQueriesContext(connection) as queries:
        store.create_branch("source", new_id="copy")

    inserts = [q["sql"] for q in queries.captured_queries if "INSERT" in q["sql"].upper()]
    entry_inserts = [sql for sql in inserts if entry_table in sql.split("SELECT")[0]]
    assert len(entry_inserts) == 1 and "SELECT" in entry_inserts[0].upper()
    assert len(store.get_messages("copy")) == 200
