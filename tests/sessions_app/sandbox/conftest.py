"""The sandbox's tests run real code under bubblewrap, in the Python `manage.py
sandbox_setup` builds (once per test run; cached across runs)."""

import json

import pytest
from django.core.management import call_command

from sessions_app.runtime.sandbox.registry import sandbox_status


@pytest.fixture(scope="session")
def sandbox_python():
    call_command("sandbox_setup", verbosity=0)


@pytest.fixture
def sandbox(sandbox_python, api):
    status = sandbox_status()
    assert status.offered, status.reason
    return status


def run(api, session_id: str, code: str, language: str = "python") -> dict:
    """One turn of the offline model running `code`; the run's JSON result (and the turn's)."""
    response = api.post(
        f"/api/sessions/{session_id}/messages/",
        {"text": f"run {language}: {code}"},
        format="json",
    )
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["status"] == "completed", body
    (result,) = [e for e in body["entries"] if e["role"] == "tool"]
    assert result["name"] == "run_code" and not result["is_error"], result
    return json.loads(result["content"]) | {"entry": result}
