"""JSON bodies built to be the worst for the API's checks, at a megabyte (under
DATA_UPLOAD_MAX_MEMORY_SIZE), are refused with the usual errors and create nothing
(docs/design.md §27). With a depth check that backtracks, the first would hold the request
for hours and the suite's timeout fails the test."""

import pytest

from sessions_app.store import get_store
from sessions_app.web import parsers

from .test_input_limits import assert_error, post_json

pytestmark = pytest.mark.django_db(transaction=True)

MIB = 1024 * 1024
DEEP = "[" * 101


@pytest.mark.parametrize(
    ("raw", "code"),
    [
        ('{"text": "' + "[" * 200 + '\\"' * (MIB // 2), "parse_error"),
        (DEEP + '"' + '\\"' * (MIB // 2), "bad_request"),
        ("[" * MIB, "bad_request"),
        ('{"text": ' + "[]," * (MIB // 3) + "1}", "parse_error"),
        ('{"text": "' + " " * MIB + '"}', "invalid"),
        ('{"text": "' + "\\u0000" * (MIB // 6) + '"}', "invalid"),
    ],
    ids=[
        "unclosed escaped quotes",
        "deep then unclosed",
        "opening brackets",
        "bad arrays",
        "spaces",
        "NUL escapes",
    ],
)
def test_the_worst_bodies_at_a_megabyte_are_refused_and_create_nothing(api, raw, code):
    assert len(raw.encode()) <= parsers.body_limit()
    assert api.post("/api/sessions/", {"id": "s1"}, format="json").status_code == 201
    assert_error(post_json(api, "/api/sessions/s1/messages/", raw), 400, code)
    assert get_store().get_meta("s1").last_seq == 0
