"""SQLite's write-ahead log stays open between connections (jarvis_site/shared/sqlite_wal.py).

Without the keeper, closing the only connection checkpoints and deletes the log, and every
request and turn paid for that. What is observable: after a write and closing every Django
connection, the log file is still there, and the data reads back.
"""

from pathlib import Path

import pytest
from django.db import connection, connections

from sessions_app.store import NewEntry, get_store
from tests.conftest import on_postgres

pytestmark = [
    pytest.mark.skipif(on_postgres(), reason="SQLite only"),
    pytest.mark.django_db(transaction=True),
]


def test_closing_every_connection_leaves_the_log_open_and_the_data_readable():
    store = get_store()
    store.create("wal-kept")
    store.append("wal-kept", [NewEntry(role="user", content="hello")])
    log = Path(str(connection.settings_dict["NAME"]) + "-wal")
    connections.close_all()

    assert log.exists()
    assert [entry.content for entry in store.get_messages("wal-kept")] == ["hello"]
