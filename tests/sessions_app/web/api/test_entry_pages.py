"""docs/design.md §7: scrolling back through a session, `GET …/entries/?before_seq=&limit=`
(both store backends)."""

import pytest

from sessions_app.store import get_store
from tests.builders import assistant, user

pytestmark = pytest.mark.django_db


@pytest.fixture
def ten(alice):
    store = get_store()
    store.create("s1", owner_id=alice.id)
    store.append("s1", [user(f"message {n}") for n in range(1, 11)])


def seqs(page):
    return [entry["seq"] for entry in page["entries"]]


def test_pages_before_a_seq_walk_back_to_the_first_entry(api, ten):
    page = api.get("/api/sessions/s1/entries/?before_seq=11&limit=4").json()
    assert seqs(page) == [7, 8, 9, 10] and page["next_before_seq"] == 7
    assert page["entries"][0]["content"] == "message 7"

    walked = []
    before = page["next_before_seq"]
    while before is not None:
        page = api.get(f"/api/sessions/s1/entries/?before_seq={before}&limit=4").json()
        walked = seqs(page) + walked
        before = page["next_before_seq"]
    assert walked == [1, 2, 3, 4, 5, 6]


def test_a_before_seq_past_the_end_gives_the_latest_entries_to_their_owner_only(api, bob_api, ten):
    page = api.get("/api/sessions/s1/entries/?before_seq=9000&limit=3").json()
    assert seqs(page) == [8, 9, 10]
    response = bob_api.get("/api/sessions/s1/entries/?before_seq=9000&limit=3")
    assert response.status_code == 404 and response.json()["code"] == "not_found"


def test_nothing_comes_before_the_first_entry(api, ten):
    page = api.get("/api/sessions/s1/entries/?before_seq=1").json()
    assert page["entries"] == [] and page["next_before_seq"] is None


def test_a_page_back_stops_at_the_byte_budget_but_holds_at_least_one_entry(api, alice, settings):
    settings.SNAPSHOT_BUDGET_BYTES = 16 * 1024
    store = get_store()
    store.create("s1", owner_id=alice.id)
    store.append("s1", [user("first")] + [assistant("b" * 7_000) for _ in range(4)])
    store.append("s1", [assistant("c" * 40_000)])

    page = api.get("/api/sessions/s1/entries/?before_seq=7").json()
    assert seqs(page) == [6] and page["entries"][0]["content"] == "c" * 40_000
    page = api.get(f"/api/sessions/s1/entries/?before_seq={page['next_before_seq']}").json()
    assert seqs(page) == [4, 5]


def test_after_and_before_together_are_a_range(api, ten):
    """OpenAPI cannot say "not both" of two query parameters: together they are the entries
    between them, the latest first when the range is longer than the page."""
    page = api.get("/api/sessions/s1/entries/?after_seq=2&before_seq=6").json()
    assert seqs(page) == [3, 4, 5]
    page = api.get("/api/sessions/s1/entries/?after_seq=2&before_seq=9&limit=2").json()
    assert seqs(page) == [7, 8]
    assert seqs(api.get("/api/sessions/s1/entries/?after_seq=5&before_seq=6").json()) == []


@pytest.mark.parametrize("value", ["0", "-1", "x", str(2**63)])
def test_a_bad_before_seq_is_refused(api, ten, value):
    response = api.get(f"/api/sessions/s1/entries/?before_seq={value}")
    assert response.status_code == 400 and response.json()["code"] == "invalid"
