"""The OpenAPI schema describes what the API answers (docs/design.md §7).

Schemathesis reads `/api/schema/` from the WSGI application itself (no server), generates
valid and invalid requests for every operation from it, sends them as Alice, and runs every
check it has on every answer (`--checks all`): no 5xx, a status the operation declares, a
body and headers of the declared shape, an invalid request refused and a valid one accepted. A fixed seed and a
bounded number of examples per operation make it a repeatable test, not a fuzzing campaign.
"""

import pytest
import schemathesis
from django.core.signals import request_finished, request_started
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections
from hypothesis import HealthCheck, seed, settings
from schemathesis import GenerationMode, checks

from sessions_app.services import prompt_modes, sessions
from tests.builders import play_turn

EXAMPLES_PER_OPERATION = 10
# Every check schemathesis has (`--checks all`): never a server error, every answer as the
# schema describes it, every request the schema forbids refused and every one it allows
# accepted — but where OpenAPI cannot say the rule, named here with the rule:
SCHEMA_CANNOT_SAY = {
    # The file must be an uploaded file (a part with a filename), not a text field.
    ("POST", "/api/import/"): [checks.positive_data_acceptance],
    # ... and its bytes an image, a text or a PDF (docs/design.md §23).
    ("POST", "/api/sessions/{id}/files/"): [checks.positive_data_acceptance],
    # run_at must be in the future, and exactly one of run_at and in_seconds given.
    ("POST", "/api/schedules/"): [checks.positive_data_acceptance],
    # report_to must be one of the caller's conversations; the text more than whitespace.
    ("POST", "/api/goals/"): [checks.positive_data_acceptance],
    # confirm must be the caller's own username.
    ("DELETE", "/api/me/"): [checks.positive_data_acceptance],
    # A URL must be an https:// one on OUTBOUND_URL_ALLOWLIST; keys a browser's own.
    ("PATCH", "/api/me/"): [checks.positive_data_acceptance],
    ("POST", "/api/me/push-subscriptions/"): [checks.positive_data_acceptance],
    # agent must be one of the agents the server defines (AGENTS_FILE, not fixed in code).
    ("POST", "/api/sessions/"): [checks.positive_data_acceptance],
}
# Short ids are what generated ids mostly are: sessions under them make some requests meet
# a real session (a history, a branch, an export) instead of a 404.
EXISTING_IDS = ("0", "A", "a", "-", "_", ":")


# Read when the module is collected (one test per operation, named by method and path), before
# the test environment adds the test client's host to ALLOWED_HOSTS: asked for as localhost.
# WSGI, not ASGI: the requests run in the test's own thread and database transaction, which
# is rolled back after each operation; through ASGI they would run in another thread, and
# every operation would have to empty the database (seconds each on PostgreSQL). The HTTP
# stack is the same Django middleware and views either way.
schema = schemathesis.openapi.from_wsgi(
    "/api/schema/", get_wsgi_application(), headers={"Host": "localhost"}
)
# Valid requests and invalid ones: every invalid one must be refused with a 4xx, every valid
# one accepted (`negative_data_rejection`, `positive_data_acceptance`).
#
# No NUL character in generated strings: the API refuses a body holding one anywhere, in keys it
# ignores too (docs/design.md §27), and OpenAPI cannot say that of keys a schema does not name
# (tests/sessions_app/web/api/test_nul_in_bodies.py checks that rule).
# Deterministic: the same examples on every run and on every machine, so a failure here is
# the code's, never the draw's.
schema.config.generation.update(modes=list(GenerationMode), allow_x00=False, deterministic=True)


@pytest.fixture
def connection_kept():
    """Django's WSGI handler closes a connection in a transaction when a request starts and
    ends; the test's transaction must outlive every request, as Django's test client keeps it."""
    for signal in (request_started, request_finished):
        signal.disconnect(close_old_connections)
    yield
    for signal in (request_started, request_finished):
        signal.connect(close_old_connections)


@pytest.fixture
def queue_runs_not_started(monkeypatch):
    """A prompt queued to an idle session is run by a thread of its own here (no server
    loop). That thread cannot see the test's uncommitted rows, and on SQLite it waits for the
    test's write lock until the lock times out; what this test checks is the answer to the
    request, so the run is noted and not started."""
    noted = []
    monkeypatch.setattr(prompt_modes, "_run_in_thread", noted.append)
    return noted


@pytest.fixture
def alice_sessions(alice):
    for session_id in EXISTING_IDS:
        sessions.session_create(owner_id=alice.id, session_id=session_id)
        play_turn(session_id, "what is 6*7?", "42", owner_id=alice.id)


@pytest.mark.django_db
@schema.parametrize()
@seed(24)
@settings(
    max_examples=EXAMPLES_PER_OPERATION,
    deadline=None,
    database=None,
    # The fixtures make users and sessions once per operation; examples share them on purpose.
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
def test_every_answer_is_what_the_schema_says(
    case, alice_token, alice_sessions, connection_kept, queue_runs_not_started
):
    excluded = SCHEMA_CANNOT_SAY.get((case.method, case.path), [])
    case.call_and_validate(
        headers={"Authorization": f"Token {alice_token}"}, excluded_checks=excluded
    )


def test_the_schema_declares_ids_pages_and_every_error():
    document = schema.raw_schema
    operations = [
        (path, method, operation)
        for path, item in document["paths"].items()
        for method, operation in item.items()
    ]
    search = document["paths"]["/api/search/"]["get"]["responses"]["200"]
    assert search["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/SearchOutput"
    }
    for path, method, operation in operations:
        responses = operation["responses"]
        assert "401" in responses, (method, path)
        if "requestBody" in operation:
            assert {"413", "415"} <= set(responses), (method, path)
        for parameter in operation.get("parameters", []):
            if parameter["in"] == "path" and parameter["name"] == "id" and "{id}" in path:
                if path.startswith("/api/sessions/"):
                    assert parameter["schema"]["maxLength"] == 200
                    assert parameter["schema"]["pattern"].startswith("^[A-Za-z0-9_:\\-]")
    throttled = {
        ("/api/sessions/{id}/messages/", "post"),
        ("/api/sessions/{id}/branch/", "post"),
        ("/api/search/", "get"),
    }
    for path, method in throttled:
        assert "429" in document["paths"][path][method]["responses"], (method, path)
