"""The store's newer session fields on every backend: spawned_by, model, parent_id on delete."""

import pytest

from sessions_app.store import NewEntry, SessionNotFound

pytestmark = pytest.mark.django_db


def test_spawned_by_is_kept_and_filters_the_list(store):
    store.create("chat")
    store.create("agent_researcher__chat", agent="researcher", spawned_by="chat")
    again = store.create("agent_researcher__chat", agent="researcher", spawned_by="other")
    assert again.spawned_by == "chat", "create of an existing id changes nothing"
    assert [meta.id for meta in store.list(include_subagents=False)] == ["chat"]
    assert {meta.id for meta in store.list()} == {"chat", "agent_researcher__chat"}


def test_model_is_set_kept_and_copied_into_branches(store, make_store):
    store.create("chat")
    assert store.get_meta("chat").model == ""
    assert store.set_model("chat", "openai:gpt-4o").model == "openai:gpt-4o"
    store.append("chat", [NewEntry(role="user", content="hi")])
    assert make_store().get_meta("chat").model == "openai:gpt-4o"
    assert store.create_branch("chat", new_id="copy").model == "openai:gpt-4o"
    with pytest.raises(SessionNotFound):
        store.set_model("missing", "offline")


def test_branches_lose_their_parent_id_when_the_parent_is_deleted(store, make_store):
    store.create("parent")
    store.append("parent", [NewEntry(role="user", content="hi")])
    store.create_branch("parent", new_id="first")
    store.create_branch("parent", new_id="second")
    store.create_branch("first", new_id="grandchild")
    store.delete("second")

    assert store.delete("parent") is True

    fresh = make_store()
    assert fresh.get_meta("first").parent_id is None
    assert fresh.get_meta("first").branched_at_seq == 1, "where it was cut stays on record"
    assert fresh.get_meta("grandchild").parent_id == "first"
    assert fresh.get_meta("second") is None
    assert [entry.content for entry in fresh.get_messages("first")] == ["hi"]
    if hasattr(store, "root"):  # jsonl: the parent's branch index goes with it
        assert not list(store.root.glob("parent.*"))
