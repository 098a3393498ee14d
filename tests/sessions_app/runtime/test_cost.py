"""session_cost: tokens and USD per model; unknown prices are shown as unknown."""

import pytest

from sessions_app.runtime.turn.cost import session_cost
from sessions_app.runtime.turn.turns import turn_run
from sessions_app.store import NewEntry, SessionNotFound, get_store

pytestmark = pytest.mark.django_db


def test_cost_per_model_and_total(settings):
    store = get_store()
    store.create("test-cost")
    store.append(
        "test-cost",
        [
            NewEntry(role="user", content="hi"),
            NewEntry(
                role="assistant",
                content="a",
                model="gpt-4o",
                usage={"input_tokens": 1_000_000, "output_tokens": 100_000},
            ),
            NewEntry(
                role="assistant",
                content="b",
                model="gpt-4o-2024-08-06",
                usage={"input_tokens": 1_000_000, "output_tokens": 0},
            ),
            NewEntry(
                role="assistant",
                content="c",
                model="offline",
                usage={"input_tokens": 40, "output_tokens": 9},
            ),
        ],
    )
    cost = session_cost(session_id="test-cost")
    by_model = {row["model"]: row for row in cost["models"]}
    assert by_model["gpt-4o"]["usd"] == pytest.approx(3.5)
    assert by_model["gpt-4o-2024-08-06"]["usd"] == pytest.approx(2.5)  # priced as its family
    assert by_model["offline"] == {
        "model": "offline",
        "input_tokens": 40,
        "output_tokens": 9,
        "usd": 0.0,
    }
    assert cost["total"]["usd"] == pytest.approx(6.0)
    assert cost["total"]["input_tokens"] == 2_000_040
    assert cost["unpriced_models"] == []

    store.append(
        "test-cost",
        [
            NewEntry(
                role="assistant",
                content="d",
                model="mystery-1",
                usage={"input_tokens": 5, "output_tokens": 5},
            ),
            NewEntry(kind="compaction", data={"summary": "s", "first_kept_seq": 5}),
        ],
    )
    cost = session_cost(session_id="test-cost")
    assert {"model": "mystery-1", "input_tokens": 5, "output_tokens": 5, "usd": None} in cost[
        "models"
    ]
    assert cost["total"]["usd"] is None, "a partial sum is not shown as the bill"
    assert cost["total"]["usd_known"] == pytest.approx(6.0), "compaction lowers nothing"
    assert cost["unpriced_models"] == ["mystery-1"]


@pytest.mark.django_db(transaction=True)
def test_offline_turns_cost_nothing_but_count_tokens():
    get_store().create("test-cost-offline")
    turn_run(session_id="test-cost-offline", text="what is 2+2")
    (row,) = session_cost(session_id="test-cost-offline")["models"]
    assert row["model"] == "offline" and row["usd"] == 0.0 and row["output_tokens"] > 0


def test_missing_session():
    with pytest.raises(SessionNotFound):
        session_cost(session_id="test-nope")
