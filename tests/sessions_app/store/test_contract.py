"""The store contract (docs/design.md §4), run against every backend: db (on SQLite, or PostgreSQL
when DATABASE_URL points there) and jsonl."""

import json

import pytest

from sessions_app.models import Session
from sessions_app.store import (
    AgentMismatch,
    InvalidSessionId,
    NewEntry,
    SessionExists,
    SessionNotFound,
    approvals,
    connections,
)
from tests.builders import assistant, call, result, user
from tests.helpers import run_in_threads, run_python

pytestmark = pytest.mark.django_db


def contents(entries):
    return [entry.content for entry in entries]


# --- create, get_meta, list -------------------------------------------------------------


def test_create_is_idempotent_and_keeps_the_first_session(store):
    first = store.create("s1", agent="jarvis", title="first")
    again = store.create("s1", agent="jarvis", title="ignored")
    assert again == first
    assert store.get_meta("s1").title == "first"


def test_create_with_another_agent_is_refused(store):
    store.create("s1", agent="jarvis")
    with pytest.raises(AgentMismatch):
        store.create("s1", agent="coder")
    assert store.get_meta("s1").agent == "jarvis"


def test_missing_session_has_no_meta_and_no_entries(store):
    assert store.get_meta("nope") is None
    assert store.get_messages("nope") == []


@pytest.mark.parametrize(
    "bad_id", ["", ".hidden", "../escape", "a/b", "a b", "x" * 201, "ä", "a\nb", "..", None]
)
def test_bad_ids_are_refused_everywhere(store, bad_id):
    with pytest.raises(InvalidSessionId):
        store.create(bad_id)
    with pytest.raises(InvalidSessionId):
        store.append(bad_id, [user("hi")])
    with pytest.raises(InvalidSessionId):
        store.get_messages(bad_id)
    with pytest.raises(InvalidSessionId):
        store.delete(bad_id)


def test_list_is_newest_activity_first_and_filters(store):
    store.create("a", owner_id=None)
    store.create("b", agent="coder")
    store.create("test-c")
    store.append("a", [user("latest activity")])
    ids = [meta.id for meta in store.list()]
    assert ids[0] == "a"
    assert set(ids) == {"a", "b", "test-c"}
    assert [meta.id for meta in store.list(agent="coder")] == ["b"]
    assert "test-c" not in [meta.id for meta in store.list(include_tests=False)]


# --- append and read --------------------------------------------------------------------


def test_append_assigns_contiguous_seqs_from_one(store):
    store.create("s1")
    first = store.append("s1", [user("hello"), assistant("hi")])
    second = store.append("s1", [user("again")])
    assert [entry.seq for entry in first + second] == [1, 2, 3]
    assert store.get_meta("s1").last_seq == 3
    assert [entry.seq for entry in store.get_messages("s1")] == [1, 2, 3]


def test_entries_with_identical_timestamps_come_back_in_append_order(store):
    store.create("s1")
    batch = [
        user("what is 2+2 and the time?"),
        assistant("", calls=[call("c1"), call("c2", name="clock", arguments="{}")]),
        result("c1", "4"),
        result("c2", "12:00", name="clock"),
        assistant("4, and it is noon"),
    ]
    stored = store.append("s1", batch)
    assert len({entry.created_at for entry in stored}) == 1  # one millisecond, one timestamp
    loaded = store.get_messages("s1")
    assert [entry.seq for entry in loaded] == [1, 2, 3, 4, 5]
    assert loaded[1].tool_calls == [call("c1"), call("c2", name="clock", arguments="{}")]
    assert [entry.tool_call_id for entry in loaded[2:4]] == ["c1", "c2"]


def test_every_field_round_trips(store):
    store.create("s1")
    entry = NewEntry(
        kind="message",
        role="assistant",
        content='ünïcödé ✓ "quotes" and\nnewlines',
        tool_calls=[call("c1", arguments='{"a": [1, 2]}')],
        model="offline",
        usage={"input_tokens": 12, "output_tokens": 3},
        turn_id="t1",
        data={"nested": {"x": 1}},
    )
    store.append(
        "s1", [entry, NewEntry(kind="turn_end", turn_id="t1", data={"status": "completed"})]
    )
    loaded = store.get_messages("s1")
    assert loaded[0].content == entry.content
    assert loaded[0].tool_calls == entry.tool_calls
    assert loaded[0].usage == entry.usage
    assert loaded[0].data == entry.data
    assert loaded[0].model == "offline" and loaded[0].turn_id == "t1"
    assert loaded[1].kind == "turn_end" and loaded[1].data == {"status": "completed"}
    assert loaded[0].is_error is False


def test_unknown_kinds_are_stored(store):
    store.create("s1")
    store.append("s1", [NewEntry(kind="future_kind", data={"x": 1})])
    assert store.get_messages("s1")[0].kind == "future_kind"


def test_after_seq_and_limit_page_through_history(store):
    store.create("s1")
    store.append("s1", [user(f"m{i}") for i in range(10)])
    assert contents(store.get_messages("s1", after_seq=7)) == ["m7", "m8", "m9"]
    assert contents(store.get_messages("s1", after_seq=2, limit=3)) == ["m2", "m3", "m4"]


def test_append_to_missing_session_fails_and_creates_nothing(store):
    with pytest.raises(SessionNotFound):
        store.append("ghost", [user("hi")])
    assert store.get_meta("ghost") is None


def test_a_bad_entry_is_refused_before_anything_is_written(store):
    store.create("s1")
    with pytest.raises(ValueError):
        store.append("s1", [user("kept?"), NewEntry(role="robot", content="bad role")])
    assert store.get_messages("s1") == []


# --- delete -----------------------------------------------------------------------------


def test_delete_removes_everything_and_missing_is_false(store):
    store.create("s1")
    store.append("s1", [user("hi")])
    store.append_proactive("s1", "m1", "reminder")
    assert store.delete("s1") is True
    assert store.get_meta("s1") is None
    assert store.get_messages("s1") == []
    assert store.delete("s1") is False
    assert store.delete("never-existed") is False
    recreated = store.create("s1")
    assert recreated.last_seq == 0 and store.get_proactive("s1") == []


def test_delete_removes_the_sessions_connection_rows_and_approval_requests(store):
    store.create("s1")
    store.create("other")
    for session_id in ("s1", "other"):
        with store.locked(session_id):
            connections.register(
                session_id=session_id, channel_name=f"tab-{session_id}", user_id=None
            )
        approvals.request_insert(
            session_id=session_id, turn_id="t1", call_id="c1", tool="forget", arguments={}
        )
    store.delete("s1")
    assert not connections.any_live("s1") and connections.any_live("other")
    assert approvals.requests_pending(session_id="s1") == []
    assert len(approvals.requests_pending(session_id="other")) == 1


# --- the session lock and the turn lease ------------------------------------------------


def test_a_lock_on_a_missing_session_leaves_nothing_behind(store):
    with store.locked("ghost", agent="jarvis", owner_id=None):
        pass
    assert store.get_meta("ghost") is None
    assert [meta.id for meta in store.list()] == []
    assert not Session.objects.filter(id="ghost").exists()  # no row to lock was left either
    store.create("s1")
    with store.locked("s1") as locked:
        assert locked
    assert store.get_meta("s1") is not None


def test_a_turn_lease_has_one_holder_and_carries_an_abort_to_it(store):
    store.create("s1")
    first, second = store.turn_lease("s1"), store.turn_lease("s1")
    assert store.request_turn_abort("s1") is False  # no turn holds it
    assert first.try_acquire() is True
    assert second.try_acquire() is False
    assert type(first).keep([first]) == []
    assert store.request_turn_abort("s1") is True
    assert type(first).keep([first]) == [first]
    first.release()
    assert second.try_acquire() is True
    assert type(second).keep([second]) == []  # the mark was meant for the ended turn
    second.release()
    with pytest.raises(SessionNotFound):
        store.turn_lease("ghost").try_acquire()


def test_an_owners_lease_of_someone_elses_session_is_not_found_and_never_taken(store, alice, bob):
    # A person's prompt takes its lease for that person's session only: the taking is the
    # ownership check, and a stranger's attempt leaves the owner's session free.
    store.create("bobs", owner_id=bob.id)
    store.create("nobodys")
    for stranger, session in ((alice.id, "bobs"), (bob.id, "nobodys")):
        with pytest.raises(SessionNotFound):
            store.turn_lease(session, owner_id=stranger).try_acquire()
    owners = store.turn_lease("bobs", owner_id=bob.id)
    assert owners.try_acquire() is True
    assert store.turn_lease("bobs", owner_id=bob.id).try_acquire() is False  # busy, not missing
    owners.release()
    assert store.turn_lease("nobodys").try_acquire() is True


# --- branch -----------------------------------------------------------------------------


def test_branch_copies_everything_and_records_the_parent(store):
    store.create("src", agent="jarvis", title="trip")
    store.append("src", [user("a"), assistant("b"), user("c"), assistant("d")])
    branch = store.create_branch("src", new_id="br")
    assert branch.parent_id == "src" and branch.branched_at_seq == 4
    assert branch.agent == "jarvis" and branch.last_seq == 4
    assert contents(store.get_messages("br")) == ["a", "b", "c", "d"]
    assert [entry.seq for entry in store.get_messages("br")] == [1, 2, 3, 4]
    assert next(meta for meta in store.list() if meta.id == "br").parent_id == "src"


def test_branch_at_seq_copies_a_prefix(store):
    store.create("src")
    store.append("src", [user("a"), assistant("b"), user("c"), assistant("d")])
    branch = store.create_branch("src", new_id="br", at_seq=2)
    assert branch.branched_at_seq == 2
    assert contents(store.get_messages("br")) == ["a", "b"]
    assert store.append("br", [user("other way")])[0].seq == 3


def test_branches_are_independent_both_ways(store):
    store.create("src")
    store.append("src", [user("shared")])
    store.create_branch("src", new_id="br")
    store.append("src", [assistant("only in source")])
    store.append("br", [assistant("only in branch")])
    assert contents(store.get_messages("src")) == ["shared", "only in source"]
    assert contents(store.get_messages("br")) == ["shared", "only in branch"]
    store.delete("src")
    assert contents(store.get_messages("br")) == ["shared", "only in branch"]
    assert store.get_meta("br").parent_id in (None, "src")


def a_finished_turn_with_a_call(store, session_id):
    store.append(
        session_id,
        [
            NewEntry(kind="turn_start", turn_id="t1", data={"model": "offline"}),
            NewEntry(role="user", content="wait 5 seconds", turn_id="t1"),
            NewEntry(
                role="assistant", tool_calls=[call("c1", "wait", '{"seconds": 5}')], turn_id="t1"
            ),
            NewEntry(role="tool", tool_call_id="c1", name="wait", content="waited", turn_id="t1"),
            NewEntry(role="assistant", content="done", turn_id="t1"),
            NewEntry(kind="turn_end", turn_id="t1", data={"status": "completed"}),
        ],
    )


def test_the_turn_tail_holds_the_turn_a_cut_falls_in(store):
    """What the branch service repairs from: everything of the turn the cut leaves open."""
    store.create("src")
    a_finished_turn_with_a_call(store, "src")
    tail = store.get_turn_tail("src", 3)
    assert [entry.seq for entry in tail] == [1, 2, 3]
    assert tail[-1].tool_calls[0]["id"] == "c1"
    whole = store.get_turn_tail("src", 6)
    assert whole[-1].kind == "turn_end"
    assert [entry.seq for entry in whole] == list(range(whole[0].seq, 7))
    assert store.get_turn_tail("src", 0) == []


def test_context_entries_start_at_the_latest_compactions_cut(store):
    """What a turn reads (docs/design.md §22): from the latest compaction's first kept entry
    on — the compaction among them — or everything when nothing was compacted."""
    store.create("long")
    assert store.get_context_entries("long") == []
    for number in range(3):
        store.append("long", [user(f"q{number}"), assistant(f"a{number}")])
    assert store.get_context_entries("long") == store.get_messages("long")
    compaction = NewEntry(kind="compaction", data={"summary": "s1", "first_kept_seq": 3})
    store.append("long", [compaction])
    assert [e.seq for e in store.get_context_entries("long")] == [3, 4, 5, 6, 7]
    # A later compaction whose cut falls on tool results: the read starts at their call,
    # as the projection does.
    store.append("long", [user("q3"), assistant("", [call("c1")]), result("c1"), result("c1")])
    store.append(
        "long", [NewEntry(kind="compaction", data={"summary": "s2", "first_kept_seq": 11})]
    )
    context = store.get_context_entries("long")
    assert [e.seq for e in context] == [9, 10, 11, 12]
    assert context[-1].data["summary"] == "s2"
    # Content that merely mentions a compaction is no compaction.
    store.append("long", [user('{"seq": 1, "kind": "compaction"}')])
    assert [e.seq for e in store.get_context_entries("long")] == [9, 10, 11, 12, 13]


def test_a_cut_after_a_long_run_of_tool_results_starts_at_their_call(store):
    """A step with more results than the first look back reaches (CUT_LOOKBACK_ENTRIES on
    the database): the read still starts at the call they answer."""
    store.create("wide")
    calls = [call(f"c{number}") for number in range(100)]
    store.append("wide", [user("q"), assistant("", calls)])
    store.append("wide", [result(f"c{number}") for number in range(100)])
    cut = 2 + 100  # the last result
    store.append(
        "wide", [NewEntry(kind="compaction", data={"summary": "s", "first_kept_seq": cut})]
    )
    context = store.get_context_entries("wide")
    assert [e.seq for e in context] == list(range(2, 104))
    assert context[0].role == "assistant" and context[-1].kind == "compaction"


def test_branch_appends_the_closing_entries_after_the_copy(store):
    store.create("src")
    a_finished_turn_with_a_call(store, "src")
    closing = [
        NewEntry(role="tool", tool_call_id="c1", name="wait", content="cut", is_error=True),
        NewEntry(kind="turn_end", turn_id="t1", data={"status": "interrupted"}),
    ]
    branch = store.create_branch("src", new_id="br", at_seq=3, closing=closing)
    copied = store.get_messages("br")
    assert [(entry.seq, entry.kind, entry.role) for entry in copied] == [
        (1, "turn_start", ""),
        (2, "message", "user"),
        (3, "message", "assistant"),
        (4, "message", "tool"),
        (5, "turn_end", ""),
    ]
    assert branch.branched_at_seq == 3 and branch.last_seq == 5
    assert store.get_meta("br").last_seq == 5
    assert store.append("br", [user("on")])[0].seq == 6
    assert len(store.get_messages("src")) == 6  # the source is untouched


def test_branch_refuses_a_source_made_anew_since_it_was_read(store):
    first = store.create("src")
    store.append("src", [user("old")])
    store.delete("src")
    store.create("src")
    store.append("src", [user("new")])
    with pytest.raises(SessionNotFound):
        store.create_branch("src", new_id="br", at_seq=1, incarnation=first.incarnation)
    assert store.get_meta("br") is None


def test_branch_refuses_a_taken_id_a_missing_source_and_a_bad_cut(store):
    store.create("src")
    store.append("src", [user("a")])
    store.create("taken")
    with pytest.raises(SessionExists):
        store.create_branch("src", new_id="taken")
    with pytest.raises(SessionNotFound):
        store.create_branch("ghost")
    with pytest.raises(ValueError):
        store.create_branch("src", at_seq=5)
    with pytest.raises(InvalidSessionId):
        store.create_branch("src", new_id="../x")


def test_server_made_branch_ids_are_unique(store):
    store.create("src")
    ids = {store.create_branch("src").id for _ in range(5)}
    assert len(ids) == 5


# --- proactive notices ------------------------------------------------------------------


def test_notices_are_idempotent_by_message_id(store):
    store.create("s1")
    notice, created = store.append_proactive("s1", "m1", "Stand-up in 5 minutes")
    again, created_again = store.append_proactive("s1", "m1", "duplicate delivery")
    assert created is True and created_again is False
    assert again.content == "Stand-up in 5 minutes"
    store.append_proactive("s1", "m2", "Build finished")
    assert [n.message_id for n in store.get_proactive("s1")] == ["m1", "m2"]
    with pytest.raises(SessionNotFound):
        store.append_proactive("ghost", "m1", "x")


def test_a_notice_keeps_the_time_of_its_first_delivery(store, make_store):
    from datetime import UTC, datetime, timedelta

    store.create("s1")
    store.append_proactive("s1", "m1", "Stand-up in 5 minutes")
    store.append_proactive("s1", "m2", "Build finished")
    first = datetime(2030, 1, 1, 9, 0, tzinfo=UTC)
    assert store.mark_proactive_delivered("s1", "m1", first).delivered_at == first
    again = store.mark_proactive_delivered("s1", "m1", first + timedelta(minutes=1))
    assert again.delivered_at == first
    # A restarted process reads the same, and the other notice is untouched.
    delivered = {n.message_id: n.delivered_at for n in make_store().get_proactive("s1")}
    assert delivered == {"m1": first, "m2": None}
    assert store.mark_proactive_delivered("s1", "nope", first) is None
    assert store.mark_proactive_delivered("ghost", "m1", first) is None


def test_notices_of_many_sessions_come_only_for_their_owner(store, django_user_model):
    alice = django_user_model.objects.create_user("alice-notices")
    bob = django_user_model.objects.create_user("bob-notices")
    store.create("a1", owner_id=alice.id)
    store.create("a2", owner_id=alice.id)
    store.create("b1", owner_id=bob.id)
    store.append_proactive("a1", "m1", "for alice")
    store.append_proactive("b1", "m2", "for bob")
    found = store.get_proactive_owned({"a1": alice.id, "a2": alice.id, "b1": alice.id})
    # a2 has no notice; b1 is bob's, whoever asks for it as alice gets nothing.
    assert {sid: [n.content for n in notices] for sid, notices in found.items()} == {
        "a1": ["for alice"]
    }
    assert store.get_proactive_owned({"b1": bob.id, "ghost": bob.id})["b1"][0].message_id == "m2"
    assert store.get_proactive_owned({}) == {}


# --- restart and concurrency ------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_a_new_store_object_and_a_new_process_see_the_same_history(make_store, backend):
    make_store().create("s1", title="persisted")
    make_store().append("s1", [user("remember me"), assistant("I will")])
    assert contents(make_store().get_messages("s1")) == ["remember me", "I will"]
    child = run_python(
        "import json\n"
        "from sessions_app.store import get_store\n"
        "store = get_store()\n"
        "print(json.dumps([e.content for e in store.get_messages('s1')]))\n"
        "store.append('s1', [__import__('sessions_app.store', fromlist=['NewEntry']).NewEntry("
        "role='user', content='from another process')])\n",
        JARVIS_SESSION__PERSISTENCE_BACKEND=backend,
    )
    assert child.returncode == 0, child.stderr
    assert json.loads(child.stdout.strip().splitlines()[-1]) == ["remember me", "I will"]
    loaded = make_store().get_messages("s1")
    assert contents(loaded) == ["remember me", "I will", "from another process"]
    assert [entry.seq for entry in loaded] == [1, 2, 3]


@pytest.mark.django_db(transaction=True)
def test_concurrent_creators_of_one_id_all_get_the_same_session(make_store):
    results = run_in_threads(lambda i: make_store().create("shared", title=f"t{i}"), 8)
    assert len({meta.created_at for meta in results}) == 1
    assert len({meta.title for meta in results}) == 1
    assert [meta.id for meta in make_store().list()] == ["shared"]


@pytest.mark.django_db(transaction=True)
def test_racing_appenders_never_duplicate_or_skip_a_seq(make_store):
    make_store().create("race")
    writers, turns = 4, 15

    def write(index):
        store = make_store()
        for turn in range(turns):
            store.append("race", [user(f"w{index}-t{turn}-q"), assistant(f"w{index}-t{turn}-a")])

    run_in_threads(write, writers)
    loaded = make_store().get_messages("race")
    assert [entry.seq for entry in loaded] == list(range(1, writers * turns * 2 + 1))
    # Each batch stayed together and in order: a question is followed by its own answer.
    for question, answer in zip(loaded[::2], loaded[1::2], strict=True):
        assert answer.content == question.content[:-1] + "a"
    assert make_store().get_meta("race").last_seq == writers * turns * 2


@pytest.mark.django_db(transaction=True)
def test_racing_processes_never_duplicate_or_skip_a_seq(make_store, backend):
    make_store().create("race")
    code = (
        "from sessions_app.store import get_store, NewEntry\n"
        "store = get_store()\n"
        "for turn in range(20):\n"
        "    store.append('race', [NewEntry(role='user', content='q'), "
        "NewEntry(role='assistant', content='a')])\n"
    )
    import concurrent.futures

    with concurrent.futures.ThreadPoolExecutor(3) as pool:
        children = list(
            pool.map(
                lambda _: run_python(code, JARVIS_SESSION__PERSISTENCE_BACKEND=backend), range(3)
            )
        )
    for child in children:
        assert child.returncode == 0, child.stderr
    loaded = make_store().get_messages("race")
    assert [entry.seq for entry in loaded] == list(range(1, 121))
    assert contents(loaded) == ["q", "a"] * 60


def test_set_title_renames_without_touching_the_history(store):
    store.create("s1")
    store.append("s1", [user("plan a trip to Porto")])
    renamed = store.set_title("s1", "Trip to Porto")
    assert renamed.title == "Trip to Porto" and renamed.last_seq == 1
    assert store.get_meta("s1").title == "Trip to Porto"
    assert [meta.title for meta in store.list()] == ["Trip to Porto"]
    assert contents(store.get_messages("s1")) == ["plan a trip to Porto"]
    assert len(store.set_title("s1", "x" * 500).title) == 200
    with pytest.raises(SessionNotFound):
        store.set_title("ghost", "nope")
