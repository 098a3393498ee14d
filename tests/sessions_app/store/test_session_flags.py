"""Pinned and archived on every backend (docs/design.md §24): set, kept, filtered by `list`,
not activity, not copied into branches, and false for a session stored before they existed."""

import json

import pytest

from sessions_app.store import NewEntry, SessionNotFound
from sessions_app.store.jsonl import JsonlSessionStore

pytestmark = pytest.mark.django_db


def test_flags_are_set_kept_filtered_and_left_out_of_branches(store, make_store):
    store.create("chat")
    store.create("other")
    store.append("chat", [NewEntry(role="user", content="hi")])
    before = store.get_meta("chat")
    assert (before.pinned, before.archived) == (False, False)

    after = store.set_flags("chat", pinned=True, archived=True)
    assert (after.pinned, after.archived) == (True, True)
    assert after.updated_at == before.updated_at, "ordering the list is not activity"
    assert store.set_flags("chat", pinned=False).archived is True, "None leaves a flag as is"
    reopened = make_store().get_meta("chat")
    assert (reopened.pinned, reopened.archived) == (False, True)

    assert [meta.id for meta in store.list(archived=True)] == ["chat"]
    assert [meta.id for meta in store.list(archived=False)] == ["other"]
    assert {meta.id for meta in store.list()} == {"chat", "other"}
    branch = store.create_branch("chat", new_id="copy")
    assert (branch.pinned, branch.archived) == (False, False)
    with pytest.raises(SessionNotFound):
        store.set_flags("missing", pinned=True)


def test_a_jsonl_meta_written_before_the_flags_existed_reads_as_neither(settings):
    store = JsonlSessionStore(settings.SESSIONS_DIR)
    store.create("old")
    path = store.root / "old.meta.json"
    first, _, rest = path.read_text().partition("\n")
    meta = json.loads(first)
    del meta["pinned"], meta["archived"]
    path.write_text(json.dumps(meta) + "\n" + rest)
    old = store.get_meta("old")
    assert (old.pinned, old.archived) == (False, False)
