"""Branches and searches have rate limits of their own, per user (docs/design.md §12, §15)."""

import pytest

from sessions_app.core.throttles import BranchRateThrottle, SearchRateThrottle, TurnRateThrottle

from .test_sessions_api import assert_error

pytestmark = pytest.mark.django_db


@pytest.fixture
def low_rates(monkeypatch):
    # DRF reads the rates from settings when it loads; this stands for BRANCH_THROTTLE_RATE=2/min
    # and SEARCH_THROTTLE_RATE=2/min.
    rates = {"turns": "60/min", "branches": "2/min", "search": "2/min"}
    for throttle in (TurnRateThrottle, BranchRateThrottle, SearchRateThrottle):
        monkeypatch.setattr(throttle, "THROTTLE_RATES", rates)


def own_sessions(api) -> set[str]:
    return {row["id"] for row in api.get("/api/sessions/").json()}


def test_branching_is_throttled_per_user_and_a_refused_branch_makes_nothing(
    api, bob_api, low_rates
):
    api.post("/api/sessions/", {"id": "src"}, format="json")
    for copy in ("copy-1", "copy-2"):
        response = api.post("/api/sessions/src/branch/", {"id": copy}, format="json")
        assert response.status_code == 201

    refused = api.post("/api/sessions/src/branch/", {"id": "copy-3"}, format="json")

    assert_error(refused, 429, "throttled")
    assert "Retry-After" in refused.headers
    assert own_sessions(api) == {"src", "copy-1", "copy-2"}
    # Another user's budget is their own; reading is not limited.
    bob_api.post("/api/sessions/", {"id": "bob-src"}, format="json")
    assert bob_api.post("/api/sessions/bob-src/branch/", {}, format="json").status_code == 201
    assert api.get("/api/sessions/src/").status_code == 200


def test_search_is_throttled_per_user(api, bob_api, low_rates):
    for _ in range(2):
        assert api.get("/api/search/", {"q": "heron"}).status_code == 200

    assert_error(api.get("/api/search/", {"q": "heron"}), 429, "throttled")
    assert bob_api.get("/api/search/", {"q": "heron"}).status_code == 200
    assert api.get("/api/sessions/").status_code == 200
