"""docs/design.md §28: where this server runs no code, `GET /api/tools/` says so and why (the
page's Workspace panel shows the sentence)."""

import pytest

pytestmark = pytest.mark.django_db


def test_the_tools_listing_says_why_no_code_runs_here(settings, api):
    settings.SANDBOX_BACKEND = "none"

    body = api.get("/api/tools/").json()

    assert body["sandbox"] == {
        "backend": "none",
        "run_code": False,
        "reason": "SANDBOX_BACKEND is none: this server runs no code",
    }
