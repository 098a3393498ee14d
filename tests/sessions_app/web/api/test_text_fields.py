"""Every text field of the API is checked by sessions_app.core.limits, the check the WebSocket and
`chat` use (docs/design.md §11): a lone surrogate is 400 `invalid` in the same words
everywhere, and nothing is stored."""

import pytest

from sessions_app.services import prompt_modes
from sessions_app.store import get_store
from tests.sessions_app.web.api.test_input_limits import assert_error, post_json

pytestmark = pytest.mark.django_db

SURROGATE_WORDS = "may not contain a lone surrogate (U+D800); send text as UTF-8"


@pytest.mark.parametrize(
    ("path", "raw", "field", "name"),
    [
        ("/api/sessions/", '{"id": "t1", "title": "a\\ud800"}', "title", "the title"),
        ("/api/sessions/", '{"id": "t1", "agent": "a\\ud800"}', "agent", "the agent"),
        ("/api/sessions/s1/messages/", '{"text": "hi \\ud800"}', "text", "the prompt"),
        (
            "/api/sessions/s1/proactive/",
            '{"message_id": "m\\ud800", "content": "x"}',
            "message_id",
            "message_id",
        ),
        (
            "/api/sessions/s1/proactive/",
            '{"message_id": "m1", "content": "\\ud800"}',
            "content",
            "the notice",
        ),
    ],
)
def test_a_lone_surrogate_in_any_text_field_is_invalid_in_the_limits_words(
    api, path, raw, field, name
):
    assert api.post("/api/sessions/", {"id": "s1"}, format="json").status_code == 201
    response = post_json(api, path, raw)
    assert_error(response, 400, "invalid")
    assert response.json()["fields"] == {field: [f"{name} {SURROGATE_WORDS}"]}
    assert get_store().get_meta("t1") is None
    assert get_store().get_meta("s1").last_seq == 0
    assert api.get("/api/sessions/s1/proactive/").json() == []


@pytest.mark.parametrize("text", [5, 5.5, None, True, ["hi"], {"hi": 1}])
def test_a_prompt_that_is_not_a_string_is_refused_as_over_the_websocket(api, text):
    """The socket answers a prompt frame with `"text": 5` with these words; HTTP took it as
    "5" and ran a turn."""
    assert api.post("/api/sessions/", {"id": "s1"}, format="json").status_code == 201
    for mode in ("reject", "queue"):
        response = api.post(
            "/api/sessions/s1/messages/", {"text": text, "mode": mode}, format="json"
        )
        assert_error(response, 400, "invalid")
        assert response.json()["fields"] == {"text": [prompt_modes.PROMPT_NOT_TEXT]}
    assert get_store().get_meta("s1").last_seq == 0


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("/api/sessions/", {"id": "t1", "title": 5}, "title"),
        ("/api/sessions/", {"id": "t1", "agent": 5}, "agent"),
        ("/api/sessions/s1/proactive/", {"message_id": 5, "content": "x"}, "message_id"),
        ("/api/sessions/s1/proactive/", {"message_id": "m1", "content": 5.0}, "content"),
    ],
)
def test_a_number_in_any_text_field_is_refused_not_stored_as_text(api, path, body, field):
    assert api.post("/api/sessions/", {"id": "s1"}, format="json").status_code == 201
    response = api.post(path, body, format="json")
    assert_error(response, 400, "invalid")
    assert field in response.json()["fields"]
    assert get_store().get_meta("t1") is None
    assert api.get("/api/sessions/s1/proactive/").json() == []
