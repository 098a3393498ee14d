"""Every entry carries its schema version `v` (docs/design.md §20), on both backends, and a
history written before versions existed reads as version 1."""

import json

import pytest
from django.db import connection

from sessions_app.models import Entry
from sessions_app.runtime.context.history import project_anthropic, project_openai
from sessions_app.store import NewEntry
from tests.builders import assistant, user

pytestmark = pytest.mark.django_db


def rewrite_stored(store, backend, session_id, change):
    """Change the stored form of every entry of a session behind the store's back: what an
    older or a newer release would have written. `change` edits one entry's dict in place
    (keys as the jsonl line has them; on the db backend only `v`)."""
    if backend == "jsonl":
        path = store.root / f"{session_id}.jsonl"
        lines = []
        for line in path.read_text().splitlines():
            data = json.loads(line)
            change(data)
            lines.append(json.dumps(data) + "\n")
        path.write_text("".join(lines))
        return
    for entry in Entry.objects.filter(session_id=session_id):
        data = {"seq": entry.seq, "v": entry.v}
        change(data)
        with connection.cursor() as cursor:
            # Raw SQL: what a release without the column (its default) or a newer one wrote.
            cursor.execute(
                f"UPDATE {Entry._meta.db_table} SET v = %s WHERE id = %s",
                [data.get("v", 1), entry.id],
            )


def test_every_entry_is_stored_with_the_current_version(store):
    store.create("s1")
    appended = store.append("s1", [user("hi"), assistant("hello")])
    branch = store.create_branch("s1", new_id="s2")
    assert [entry.v for entry in appended] == [1, 1]
    assert [entry.v for entry in store.get_messages("s1")] == [1, 1]
    assert [entry.v for entry in store.get_messages(branch.id)] == [1, 1]
    assert appended[0].to_dict()["v"] == 1


def test_entries_written_before_versions_existed_read_as_version_one(store, backend):
    store.create("s1")
    store.append("s1", [user("hi"), assistant("hello")])
    rewrite_stored(store, backend, "s1", lambda data: data.pop("v", None))
    assert [(entry.content, entry.v) for entry in store.get_messages("s1")] == [
        ("hi", 1),
        ("hello", 1),
    ]
    # And the next append goes on from there.
    assert store.append("s1", [user("again")])[0].seq == 3


def test_an_entry_of_an_unknown_version_is_kept_but_never_sent_to_a_model(store, backend):
    store.create("s1")
    store.append("s1", [user("old question"), assistant("old answer")])
    rewrite_stored(store, backend, "s1", lambda data: data.update(v=2))
    store.append("s1", [NewEntry(role="user", content="new question")])
    history = store.get_messages("s1")
    assert [entry.v for entry in history] == [2, 2, 1]
    sent = project_openai(history, "system")
    assert [m["content"] for m in sent] == ["system", "new question"]
    assert "old" not in json.dumps(project_anthropic(history, "system"))
