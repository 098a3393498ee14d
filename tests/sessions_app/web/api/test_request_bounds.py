"""Limits nobody steps around (docs/design.md §27): a share's readers are counted by the
address the server sees, whatever X-Forwarded-For they send; the shared page has a CSP; a
file id that cannot be one is a 404; the sessions list answers at most `limit` sessions."""

import pytest
from rest_framework.test import APIClient

from sessions_app.core.throttles import ShareRateThrottle
from tests.sessions_app.files.helpers import png_bytes, upload

from .test_sessions_api import assert_error

pytestmark = pytest.mark.django_db


@pytest.fixture
def token(api):
    api.post("/api/sessions/", {"id": "trip"}, format="json")
    response = api.post("/api/sessions/trip/shares/", {}, format="json")
    assert response.status_code == 201, response.content
    return response.json()["url"].removeprefix("/s/")


def test_a_changing_x_forwarded_for_does_not_reset_the_share_limit(token, monkeypatch):
    # Stands for SHARE_THROTTLE_RATE=3/min.
    monkeypatch.setattr(ShareRateThrottle, "THROTTLE_RATES", {"shares": "3/min"})
    reader = APIClient()
    answers = [
        reader.get(f"/api/shared/{token}/", HTTP_X_FORWARDED_FOR=f"198.51.100.{n}")
        for n in range(5)
    ]
    assert [answer.status_code for answer in answers] == [200, 200, 200, 429, 429]
    page = reader.get(f"/s/{token}", HTTP_X_FORWARDED_FOR="203.0.113.77")
    assert page.status_code == 429


def test_the_shared_page_runs_only_its_own_scripts(token):
    page = APIClient().get(f"/s/{token}")
    assert page.status_code == 200
    policy = page["Content-Security-Policy"]
    assert "script-src 'self'" in policy
    assert "frame-ancestors 'none'" in policy
    assert "object-src 'none'" in policy


@pytest.mark.parametrize("route", ["", "thumb/"])
def test_a_nul_in_a_file_id_is_not_found(api, token, route):
    upload(api, "trip", "beach.png", png_bytes())
    assert_error(api.get(f"/api/sessions/trip/files/ab%00cd/{route}"), 404, "not_found")
    shared = APIClient().get(f"/api/shared/{token}/files/ab%00cd/{route}")
    assert shared.status_code == 404


def test_the_sessions_list_answers_at_most_limit(api):
    for n in range(5):
        api.post("/api/sessions/", {"id": f"s-{n}"}, format="json")
    everything = [row["id"] for row in api.get("/api/sessions/").json()]
    assert len(everything) == 5

    first = api.get("/api/sessions/", {"limit": 2}).json()
    rest = api.get("/api/sessions/", {"limit": 2, "offset": 2}).json()
    assert [row["id"] for row in first + rest] == everything[:4]
    assert_error(api.get("/api/sessions/", {"limit": 100_000}), 400, "invalid")
