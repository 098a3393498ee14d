"""The session's thinking level on every backend (docs/design.md §20): set, kept, copied into
branches, and "off" for a session stored before the level existed."""

import json

import pytest

from sessions_app.store import NewEntry, SessionNotFound
from sessions_app.store.jsonl import JsonlSessionStore

pytestmark = pytest.mark.django_db


def test_thinking_is_set_kept_and_copied_into_branches(store, make_store):
    store.create("chat")
    assert store.get_meta("chat").thinking == "off"
    assert store.set_thinking("chat", "high").thinking == "high"
    store.append("chat", [NewEntry(role="user", content="hi")])
    assert make_store().get_meta("chat").thinking == "high"
    assert [meta.thinking for meta in store.list()] == ["high"]
    assert store.create_branch("chat", new_id="copy").thinking == "high"
    with pytest.raises(SessionNotFound):
        store.set_thinking("missing", "low")


def test_a_jsonl_meta_written_before_thinking_existed_reads_as_off(settings):
    store = JsonlSessionStore(settings.SESSIONS_DIR)
    store.create("old")
    path = store.root / "old.meta.json"
    first, _, rest = path.read_text().partition("\n")
    meta = json.loads(first)
    del meta["thinking"]
    path.write_text(json.dumps(meta) + "\n" + rest)
    assert store.get_meta("old").thinking == "off"
