"""store.search and the indexes behind it, on every backend; the query language's rules."""

import sqlite3

import pytest
from django.db import connection

from sessions_app.store import NewEntry
from sessions_app.store.jsonl import JsonlSessionStore
from sessions_app.store.jsonl_search import INDEX_FILE, JsonlSearchIndex
from sessions_app.store.search import fts5_query, has_wanted_term, snippet_parts

pytestmark = pytest.mark.django_db


def said(store, session_id, *texts, role="user"):
    return store.append(session_id, [NewEntry(role=role, content=text) for text in texts])


def hits(store, query, owner_id, **kwargs):
    return [(hit.session_id, hit.seq) for hit in store.search(owner_id, query, **kwargs)]


@pytest.fixture
def owner(alice):
    return alice.id


def test_search_returns_hits_with_title_role_time_and_marked_snippet(store, owner):
    store.create("s1", owner_id=owner, title="Birds")
    (record,) = said(store, "s1", "a heron stood in the reeds")

    (hit,) = store.search(owner, "herons")

    assert (hit.session_id, hit.title, hit.seq, hit.role) == ("s1", "Birds", 1, "user")
    assert hit.created_at == record.created_at
    assert hit.rank > 0
    assert ("heron", True) in hit.snippet
    assert "".join(text for text, _ in hit.snippet) == "a heron stood in the reeds"


def test_only_the_owners_sessions_and_none_without_an_owner(store, owner, bob):
    other = bob.id
    store.create("mine", owner_id=owner)
    store.create("theirs", owner_id=other)
    store.create("system")  # no owner
    for session_id in ("mine", "theirs", "system"):
        said(store, session_id, "the otter swam")

    assert hits(store, "otter", owner) == [("mine", 1)]
    assert hits(store, "otter", other) == [("theirs", 1)]


def test_delete_and_branch_keep_the_index_exact(store, owner, backend):
    store.create("src", owner_id=owner)
    said(store, "src", "first kestrel", "second kestrel")
    said(store, "src", "kestrel again", role="assistant")
    store.append("src", [NewEntry(role="tool", tool_call_id="c", name="t", content="kestrel")])
    store.create_branch("src", new_id="copy", at_seq=2)

    assert sorted(hits(store, "kestrel", owner)) == [
        ("copy", 1),
        ("copy", 2),
        ("src", 1),
        ("src", 2),
        ("src", 3),
    ]
    store.delete("src")
    assert sorted(hits(store, "kestrel", owner)) == [("copy", 1), ("copy", 2)]
    if backend == "db" and connection.vendor == "sqlite":
        assert_sqlite_index_matches_the_messages()


def assert_sqlite_index_matches_the_messages():
    """The FTS5 table indexes exactly the searchable messages, no stale or extra rows."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT id FROM sessions_app_entry_search_docsize ORDER BY id")
        indexed = [row[0] for row in cursor.fetchall()]
        cursor.execute(
            "SELECT id FROM sessions_app_entry WHERE kind = 'message' "
            "AND role IN ('user', 'assistant') ORDER BY id"
        )
        assert indexed == [row[0] for row in cursor.fetchall()]


def test_a_limit_and_offset_page_through_hits(store, owner):
    store.create("many", owner_id=owner)
    said(store, "many", *[f"wren {n}" for n in range(7)])

    pages = [hits(store, "wren", owner, limit=3, offset=offset) for offset in (0, 3, 6)]

    assert [len(page) for page in pages] == [3, 3, 1]
    assert sorted(hit for page in pages for hit in page) == [("many", n) for n in range(1, 8)]


# --- the jsonl index ----------------------------------------------------------------------


@pytest.fixture
def jsonl(settings, owner):
    store = JsonlSessionStore(settings.SESSIONS_DIR)
    store.create("j", owner_id=owner)
    return store


def test_jsonl_index_is_built_from_the_files_when_it_is_missing(jsonl, settings, owner):
    said(jsonl, "j", "an old puffin story")
    jsonl.create_branch("j", new_id="j2")
    for path in settings.SESSIONS_DIR.glob(INDEX_FILE + "*"):
        path.unlink()

    reopened = JsonlSessionStore(settings.SESSIONS_DIR)

    assert sorted(hits(reopened, "puffin", owner)) == [("j", 1), ("j2", 1)]


def test_jsonl_index_is_built_around_a_damaged_session_file(jsonl, settings, owner):
    jsonl.create("broken", owner_id=owner)
    said(jsonl, "broken", "one", "two", "three")
    said(jsonl, "j", "a healthy skua")
    path = settings.SESSIONS_DIR / "broken.jsonl"
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(lines[0] + b"{not json}\n" + lines[2])
    for index_file in settings.SESSIONS_DIR.glob(INDEX_FILE + "*"):
        index_file.unlink()

    reopened = JsonlSessionStore(settings.SESSIONS_DIR)

    assert hits(reopened, "skua", owner) == [("j", 1)]


def test_jsonl_index_catches_up_on_the_next_append_after_a_failed_write(jsonl, owner, monkeypatch):
    said(jsonl, "j", "gannet one")
    real_add = JsonlSearchIndex._add

    def broken(*args, **kwargs):
        raise sqlite3.OperationalError("disk I/O error")

    monkeypatch.setattr(JsonlSearchIndex, "_add", broken)
    said(jsonl, "j", "gannet two")  # durable, though not indexed yet
    assert [entry.content for entry in jsonl.get_messages("j")] == ["gannet one", "gannet two"]
    assert hits(jsonl, "gannet", owner) == [("j", 1)]

    monkeypatch.setattr(JsonlSearchIndex, "_add", real_add)
    said(jsonl, "j", "gannet three")

    assert sorted(hits(jsonl, "gannet", owner)) == [("j", 1), ("j", 2), ("j", 3)]


def test_jsonl_delete_that_cannot_clear_the_index_deletes_nothing(jsonl, owner, monkeypatch):
    said(jsonl, "j", "a private cormorant")

    def broken(self, session_id):
        raise sqlite3.OperationalError("database is locked")

    monkeypatch.setattr(JsonlSearchIndex, "remove", broken)
    with pytest.raises(sqlite3.OperationalError):
        jsonl.delete("j")

    assert jsonl.get_meta("j") is not None
    assert hits(jsonl, "cormorant", owner) == [("j", 1)]


def test_jsonl_hits_of_sessions_whose_files_vanished_are_not_shown(jsonl, settings, owner):
    said(jsonl, "j", "a lost albatross")
    for path in settings.SESSIONS_DIR.glob("j.*"):
        path.unlink()

    assert hits(jsonl, "albatross", owner) == []

    # The id made again starts with nothing of the old conversation.
    jsonl.create("j", owner_id=owner)
    said(jsonl, "j", "a new start")
    assert hits(jsonl, "albatross", owner) == []
    assert hits(jsonl, "start", owner) == [("j", 1)]


# --- the query language -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("heron", '("heron")'),
        ("grey heron", '("grey" AND "heron")'),
        ('"grey heron" nest', '("grey heron" AND "nest")'),
        ("heron or egret", '(("heron" OR "egret"))'),
        ("nest heron OR egret", '("nest" AND ("heron" OR "egret"))'),
        ("heron -egret", '("heron") NOT "egret"'),
        ('heron -"little egret"', '("heron") NOT "little egret"'),
        ('say "hi', '("say" AND "hi")'),
        ('c++ AND "', '("c++" AND "AND")'),
        ('quote"inside', '("quote""inside")'),
        ("or heron", '("heron")'),
        ("-egret", None),
        ("!!! ...", None),
        ("", None),
    ],
)
def test_fts5_query_quotes_every_term(query, expected):
    assert fts5_query(query) == expected


def test_a_query_of_exclusions_wants_nothing():
    assert not has_wanted_term("-heron -egret")
    assert has_wanted_term("heron -egret")


def test_fts5_accepts_every_translated_query():
    db = sqlite3.connect(":memory:")
    db.execute("CREATE VIRTUAL TABLE t USING fts5(x)")
    db.execute("INSERT INTO t VALUES ('c++ and \"quote\"inside heron')")
    for query in ['c++ AND "', 'quote"inside', "NEAR(x", "x*", "^x", "(((", 'a -"b c" or d']:
        match = fts5_query(query)
        if match is not None:
            db.execute("SELECT * FROM t WHERE t MATCH ?", (match,)).fetchall()


def test_snippet_parts_are_balanced_whatever_the_marks():
    start, end = "\ufdd0", "\ufdd1"
    assert snippet_parts(f"a {start}b{end} c") == (("a ", False), ("b", True), (" c", False))
    assert snippet_parts(f"{end}a{start}{start}b") == (("a", False), ("b", True))
    assert snippet_parts("") == ()


# --- long messages: the snippet comes from a window around the hit -----------------------

LOREM = "lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod tempor".split()


def long_text(length: int, tail: str = "") -> str:
    words = (LOREM[n % len(LOREM)] for n in range(length))
    return (" ".join(words))[: length - len(tail)] + tail


def plain(snippet) -> str:
    return "".join(text for text, _ in snippet)


def test_a_hit_deep_inside_a_long_message_shows_the_words_around_it(store, owner):
    text = long_text(90_000) + " the grey herons nested by the old mill " + long_text(10_000)
    store.create("long", owner_id=owner)
    said(store, "long", text)

    (hit,) = store.search(owner, "heron")

    assert ("herons", True) in hit.snippet
    assert "nested by the old mill" in plain(hit.snippet)
    # An excerpt, and it says the message goes on both ways.
    assert len(plain(hit.snippet)) < 400
    assert plain(hit.snippet).startswith("…") and plain(hit.snippet).endswith("…")


def test_a_word_said_everywhere_in_long_messages_finds_every_message(store, owner):
    store.create("pastes", owner_id=owner)
    said(store, "pastes", *(long_text(100_000, tail=f" paste {n}") for n in range(3)))

    found = store.search(owner, "lorem or ipsum")

    assert sorted(hit.seq for hit in found) == [1, 2, 3]
    for hit in found:
        assert any(matched for _, matched in hit.snippet)
        assert len(plain(hit.snippet)) < 400


def test_words_that_only_start_like_the_query_do_not_hide_the_hit(store, owner):
    # "herd" and "here" start like "herons" would before stemming; only the heron matches.
    text = " ".join(
        [long_text(3_000), "the herd", long_text(3_000), "here", long_text(20_000)]
        + ["a heron waded", long_text(3_000)]
    )
    store.create("long", owner_id=owner)
    said(store, "long", text)

    (hit,) = store.search(owner, "herons")

    assert ("heron", True) in hit.snippet
    assert "waded" in plain(hit.snippet)
