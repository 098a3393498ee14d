"""NUL and lone surrogates anywhere in a JSON body are refused whole, as in a WebSocket frame:
400 `invalid` naming where, and nothing changes — on SQLite, which would store them, as on
PostgreSQL, which cannot (docs/design.md §27)."""

import pytest

from notices_app.models import Schedule
from sessions_app.store import get_store

pytestmark = pytest.mark.django_db

NUL = "\\u0000"
SURROGATE = "\\ud800"


def post_raw(client, path: str, raw: str):
    return client.generic("POST", path, raw, content_type="application/json")


def assert_invalid_naming(response, where: str):
    assert response.status_code == 400, response.content
    body = response.json()
    assert body["code"] == "invalid"
    assert where in body["detail"]


@pytest.mark.parametrize("bad", [NUL, SURROGATE], ids=["NUL", "lone surrogate"])
def test_a_session_body_with_bad_text_in_a_field_nobody_reads_creates_nothing(
    api, alice, backend, bad
):
    response = post_raw(
        api, "/api/sessions/", f'{{"id": "n1", "note": {{"x": ["ok", "a{bad}b"]}}}}'
    )
    assert_invalid_naming(response, "body.note.x[1]")
    assert get_store().list(owner_id=alice.id) == []


@pytest.mark.parametrize("bad", [NUL, SURROGATE], ids=["NUL", "lone surrogate"])
def test_a_key_with_bad_text_is_refused_too(api, alice, backend, bad):
    response = post_raw(api, "/api/sessions/", f'{{"id": "n1", "a{bad}": 1}}')
    assert_invalid_naming(response, "a key of body")
    assert get_store().list(owner_id=alice.id) == []


def test_a_schedule_body_with_nul_beside_its_text_schedules_nothing(api):
    response = post_raw(
        api, "/api/schedules/", f'{{"text": "water the plants", "in_seconds": 60, "x": ["{NUL}"]}}'
    )
    assert_invalid_naming(response, "body.x[0]")
    assert not Schedule.objects.exists()


def test_the_same_body_without_it_is_taken(api):
    response = post_raw(api, "/api/sessions/", '{"id": "n1", "note": {"x": ["ok", "a-b"]}}')
    assert response.status_code == 201
    response = post_raw(api, "/api/schedules/", '{"text": "water the plants", "in_seconds": 60}')
    assert response.status_code == 201
