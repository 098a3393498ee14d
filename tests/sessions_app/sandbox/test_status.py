"""docs/design.md §28: code is never run unsandboxed. Where the sandbox is `none` (or its
probe fails), `run_code` is not offered and `/readyz`'s details say why."""

import pytest
from django.test import Client

from sessions_app.runtime.sandbox.registry import sandbox_status
from sessions_app.selectors.turns import request_header_of
from sessions_app.store import get_store

pytestmark = pytest.mark.django_db(transaction=True)


def test_with_no_sandbox_run_code_is_not_offered_and_readyz_says_why(settings, api):
    settings.SANDBOX_BACKEND = "none"
    api.post("/api/sessions/", {"id": "plain"}, format="json")

    answer = api.post(
        "/api/sessions/plain/messages/", {"text": "run python: print(1)"}, format="json"
    ).json()

    assert answer["status"] == "completed"
    assert [e for e in answer["entries"] if e["role"] == "tool"] == [], "nothing was run"
    header = request_header_of(get_store().get_messages("plain")[0])
    assert "run_code" not in [tool["name"] for tool in header["tools"]]
    ready = Client().get("/readyz")
    assert ready.status_code == 200
    assert ready.json() == {
        "status": "ok",
        "details": {
            "sandbox": {
                "backend": "none",
                "run_code": False,
                "reason": "SANDBOX_BACKEND is none: this server runs no code",
            }
        },
    }


def test_a_missing_sandbox_python_keeps_run_code_off_and_says_how_to_build_it(settings):
    settings.SANDBOX_PYTHON = "/nonexistent/venv/bin/python"
    status = sandbox_status()
    assert status.offered is False
    assert "manage.py sandbox_setup" in status.reason


def test_where_it_isolates_run_code_is_offered_and_readyz_is_plain(sandbox):
    assert sandbox_status().backend == "bwrap"
    assert Client().get("/readyz").json() == {"status": "ok"}
