"""GET /api/search/: what a person searching their conversations sees (both store backends,
and the db backend on SQLite and PostgreSQL)."""

import pytest

from sessions_app.store import NewEntry, get_store
from tests.builders import turn_entries

pytestmark = pytest.mark.django_db


def new_session(client, session_id, title=""):
    response = client.post("/api/sessions/", {"id": session_id, "title": title}, format="json")
    assert response.status_code == 201, response.content
    return session_id


def a_turn(session_id, question, answer, tool_output="nothing to see"):
    """A finished turn with a tool call, stored the way the runtime stores it."""
    entries = turn_entries(question, answer, tools=[("lookup", {"q": question}, tool_output)])
    return get_store().append(session_id, entries)


def search(client, q, **params):
    response = client.get("/api/search/", {"q": q, **params})
    assert response.status_code == 200, response.content
    return response.json()


def found(client, q, **params):
    """(session id, seq) of every hit of one page."""
    return [(hit["session_id"], hit["seq"]) for hit in search(client, q, **params)["hits"]]


def assert_bad_request(response):
    assert response.status_code == 400, response.content
    body = response.json()
    assert body["code"] == "invalid"
    assert isinstance(body["detail"], str) and body["detail"]


# --- finding ----------------------------------------------------------------------------------


def test_finds_a_word_typed_in_another_session(api):
    new_session(api, "garden", title="Garden plans")
    new_session(api, "taxes", title="Taxes")
    a_turn("garden", "Which tomatoes grow well in shade?", "Cherry tomatoes tolerate shade.")
    a_turn("taxes", "When is the deadline?", "The fifteenth of April.")

    body = search(api, "tomatoes")

    assert body["query"] == "tomatoes"
    assert body["next_offset"] is None
    hits = body["hits"]
    assert {(hit["session_id"], hit["seq"], hit["role"]) for hit in hits} == {
        ("garden", 2, "user"),
        ("garden", 5, "assistant"),
    }
    for hit in hits:
        assert hit["title"] == "Garden plans"
        assert hit["rank"] > 0
        assert hit["created_at"]


def test_words_match_in_their_other_forms(api):
    new_session(api, "deploys")
    a_turn("deploys", "We deployed the service on Monday.", "Noted.")

    assert found(api, "deploying") == [("deploys", 2)]


def test_only_user_and_assistant_words_are_searched_not_tool_output(api):
    new_session(api, "weather")
    a_turn("weather", "Will it rain?", "No rain today.", tool_output="barometer reading 1013 hPa")

    assert found(api, "barometer") == []
    assert found(api, "lookup") == []  # the tool's name and arguments are not searched either
    assert {seq for _, seq in found(api, "rain")} == {2, 5}


def test_quoted_words_or_and_exclusions(api):
    new_session(api, "one")
    new_session(api, "two")
    a_turn("one", "the red kite flew", "a kite is a bird")
    a_turn("two", "a red balloon", "the kite string broke")

    assert sorted(found(api, '"red kite"')) == [("one", 2)]
    assert sorted(found(api, "balloon or bird")) == [("one", 5), ("two", 2)]
    assert sorted(found(api, "kite -bird")) == [("one", 2), ("two", 5)]
    assert found(api, "-kite") == []  # exclusions alone look for nothing


@pytest.mark.parametrize(
    "q", ['c++ AND "', "NEAR(kite", "kite*", "^kite", 'kite"', "(((", "!!!", "-", "or", "OR OR"]
)
def test_query_syntax_of_the_database_is_never_an_error(api, q):
    new_session(api, "odd")
    a_turn("odd", "the kite flew", "c++ code")

    body = search(api, q)  # 200, whatever the text

    for hit in body["hits"]:
        assert hit["session_id"] == "odd"


# --- ownership, delete, branch -------------------------------------------------------------


def test_never_finds_another_users_messages(api, bob_api):
    new_session(api, "alice-notes")
    new_session(bob_api, "bob-notes")
    a_turn("alice-notes", "my marmalade recipe", "use bitter oranges")
    a_turn("bob-notes", "bob's marmalade secret", "add whisky")

    assert found(api, "marmalade") == [("alice-notes", 2)]
    assert found(bob_api, "marmalade") == [("bob-notes", 2)]
    assert found(bob_api, "oranges") == []
    assert found(api, "whisky") == []


def test_forgets_a_deleted_session(api):
    new_session(api, "secret")
    new_session(api, "kept")
    a_turn("secret", "the password hint is lighthouse", "I will remember lighthouse.")
    a_turn("kept", "a lighthouse postcard", "Nice.")
    assert len(found(api, "lighthouse")) == 3

    assert api.delete("/api/sessions/secret/").json() == {"deleted": True, "exports": []}

    assert found(api, "lighthouse") == [("kept", 2)]
    # The same id made again starts empty, and so does its part of the index.
    new_session(api, "secret")
    assert found(api, "password") == []


def test_a_branch_copy_is_found_under_the_branch(api):
    new_session(api, "trip", title="Trip")
    a_turn("trip", "book a ferry to Skye", "The ferry is booked.")
    a_turn("trip", "and a hotel in Portree", "Hotel booked.")

    whole = api.post("/api/sessions/trip/branch/", {"id": "trip-b"}, format="json")
    early = api.post("/api/sessions/trip/branch/", {"id": "trip-a", "at_seq": 6}, format="json")
    assert whole.status_code == early.status_code == 201

    assert sorted(found(api, "ferry")) == [
        ("trip", 2),
        ("trip", 5),
        ("trip-a", 2),
        ("trip-a", 5),
        ("trip-b", 2),
        ("trip-b", 5),
    ]
    # Cut before the second turn: the branch has no hotel.
    assert sorted(found(api, "Portree")) == [("trip", 8), ("trip-b", 8)]
    hits = search(api, "Portree")["hits"]
    assert {hit["title"] for hit in hits} == {"Trip"}

    # Afterwards the two are independent, in the index too.
    a_turn("trip-b", "add a whale-watching tour", "Tour added.")
    assert found(api, "whale") == [("trip-b", 14)]
    api.delete("/api/sessions/trip/")
    assert sorted(found(api, "Portree")) == [("trip-b", 8)]


# --- pages and snippets ---------------------------------------------------------------------


def test_pages_cover_every_hit_once_best_first(api):
    new_session(api, "long")
    messages = [NewEntry(role="user", content=f"note {n}: buy lemons") for n in range(23)]
    messages.append(NewEntry(role="user", content="lemons lemons lemons, only lemons"))
    get_store().append("long", messages)

    first = search(api, "lemons", limit=10)
    second = search(api, "lemons", limit=10, offset=10)
    last = search(api, "lemons", limit=10, offset=20)

    assert [len(page["hits"]) for page in (first, second, last)] == [10, 10, 4]
    assert (first["next_offset"], second["next_offset"], last["next_offset"]) == (10, 20, None)
    hits = first["hits"] + second["hits"] + last["hits"]
    assert sorted(hit["seq"] for hit in hits) == list(range(1, 25))
    # The message that says it most comes first; equal ranks put the newest first.
    assert hits[0]["seq"] == 24
    ranks = [hit["rank"] for hit in hits]
    assert ranks == sorted(ranks, reverse=True)
    assert [hit["seq"] for hit in hits[1:]] == list(range(23, 0, -1))
    assert search(api, "lemons", offset=50)["hits"] == []


def test_snippet_marks_the_match_and_escapes_everything_else(api):
    new_session(api, "html")
    text = 'Try <script>alert("x")</script> & the <b>quince</b> jam, said "Ann" & \'Bo\'.'
    get_store().append("html", [NewEntry(role="user", content=text)])

    (hit,) = search(api, "quince")["hits"]

    snippet = hit["snippet"]
    assert "<mark>quince</mark>" in snippet
    assert "<script" not in snippet and "<b>" not in snippet
    assert "&lt;script&gt;" in snippet and "&lt;b&gt;" in snippet and "&amp;" in snippet
    without_marks = snippet.replace("<mark>", "").replace("</mark>", "")
    assert "<" not in without_marks and ">" not in without_marks


def test_snippet_of_a_long_message_is_an_excerpt_around_the_match(api):
    new_session(api, "essay")
    filler = " ".join(f"word{n}" for n in range(300))
    get_store().append("essay", [NewEntry(role="assistant", content=f"{filler} pelican {filler}")])

    (hit,) = search(api, "pelican")["hits"]

    assert "<mark>pelican</mark>" in hit["snippet"]
    assert len(hit["snippet"]) < 600


# --- bad input --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "params",
    [
        {},
        {"q": ""},
        {"q": "   "},
        {"q": "x" * 201},
        {"q": "tea\x00cake"},
        {"q": "tea", "limit": 0},
        {"q": "tea", "limit": 51},
        {"q": "tea", "limit": "ten"},
        {"q": "tea", "offset": -1},
        {"q": "tea", "offset": 10_001},
    ],
)
def test_bad_input_is_a_400_with_a_code(api, params):
    assert_bad_request(api.get("/api/search/", params))


def test_a_query_at_the_length_limit_is_accepted(api):
    assert search(api, "x" * 200)["hits"] == []


def test_search_needs_a_login(db, backend):
    from rest_framework.test import APIClient

    response = APIClient().get("/api/search/", {"q": "tea"})
    assert response.status_code == 401
    assert response.json()["code"] == "not_authenticated"
