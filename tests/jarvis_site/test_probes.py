"""The operator's endpoints: `/healthz`, `/readyz`, `/metrics` (docs/design.md §19)."""

import json

import pytest
from django.test import Client
from prometheus_client.parser import text_string_to_metric_families

from sessions_app.runtime.loop import drain
from tests.helpers import run_python

pytestmark = pytest.mark.django_db


def sample(text: str, name: str, **labels) -> float:
    """One sample's value in a Prometheus exposition (0 when the series is absent)."""
    for family in text_string_to_metric_families(text):
        for found in family.samples:
            if found.name == name and all(found.labels.get(k) == v for k, v in labels.items()):
                return found.value
    return 0.0


def scrape(**headers) -> str:
    response = Client().get("/metrics", headers=headers)
    assert response.status_code == 200, response.content
    return response.content.decode()


def test_healthz_answers_without_login_or_a_known_host():
    response = Client(HTTP_HOST="10.1.2.3:8000").get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


def test_readyz_is_ok_on_a_migrated_database():
    response = Client().get("/readyz")
    assert (response.status_code, response.json()) == (200, {"status": "ok"})


def test_readyz_names_an_unreachable_redis(settings):
    settings.REDIS_URL = "redis://127.0.0.1:1/0"  # nothing listens on port 1
    response = Client().get("/readyz")
    assert response.status_code == 503
    assert response.json() == {"status": "redis", "failed": {"redis": "unreachable"}}


def test_readyz_fails_on_a_database_that_was_never_migrated(tmp_path):
    probe = run_python(
        "from django.test import Client\n"
        "response = Client().get('/readyz')\n"
        "print(response.status_code, response.content.decode())\n",
        DATABASE_URL=f"sqlite:///{tmp_path / 'empty.sqlite3'}",
    )
    status, body = probe.stdout.strip().split(" ", 1)
    assert status == "503", probe.stderr
    assert json.loads(body)["status"] == "database"
    assert json.loads(body)["failed"]["database"].endswith("migrations not applied")


def test_readyz_answers_draining_at_once_when_the_worker_drains(monkeypatch):
    monkeypatch.setattr(drain, "_draining", True)
    response = Client().get("/readyz")
    assert (response.status_code, response.json()) == (503, {"status": "draining"})
    # The process still lives: only traffic should go elsewhere.
    assert Client().get("/healthz").status_code == 200


def test_metrics_are_served_to_this_machine_without_a_token():
    text = scrape()
    for name in (
        "jarvis_turns",
        "jarvis_turn_duration_seconds",
        "jarvis_turn_overhead_seconds",
        "jarvis_model_call_seconds",
        "jarvis_ws_connections",
        "jarvis_events_sent",
        "jarvis_lease_busy",
        "jarvis_repairs",
        "jarvis_queue_depth",
        "jarvis_notice_deliveries",
    ):
        assert name in {family.name for family in text_string_to_metric_families(text)}, name


def test_metrics_relayed_by_a_proxy_need_the_token(settings):
    settings.METRICS_TOKEN = "s3cret-scrape"
    relayed = Client().get("/metrics", headers={"X-Forwarded-For": "203.0.113.9"})
    assert relayed.status_code == 401
    assert relayed.json()["code"] == "not_authenticated"
    wrong = Client().get(
        "/metrics", headers={"X-Forwarded-For": "203.0.113.9", "Authorization": "Bearer nope"}
    )
    assert (wrong.status_code, wrong.json()["code"]) == (403, "permission_denied")
    right = Client().get(
        "/metrics",
        headers={"X-Forwarded-For": "203.0.113.9", "Authorization": "Bearer s3cret-scrape"},
    )
    assert right.status_code == 200 and "jarvis_turns_total" in right.content.decode()


def test_a_remote_scrape_is_refused_when_no_token_is_configured(settings):
    settings.METRICS_TOKEN = ""
    response = Client(REMOTE_ADDR="198.51.100.7").get(
        "/metrics", headers={"Authorization": "Bearer anything"}
    )
    assert response.status_code == 403


def test_each_finished_turn_adds_one_completed_turn(api):
    assert api.post("/api/sessions/", {"id": "metered"}, format="json").status_code == 201
    before = scrape()
    for prompt in ("what is 2+3?", "what is 6*7?"):
        answer = api.post("/api/sessions/metered/messages/", {"text": prompt}, format="json")
        assert answer.json()["status"] == "completed"
    after = scrape()
    completed = "jarvis_turns_total"
    assert (
        sample(after, completed, status="completed") - sample(before, completed, status="completed")
        == 2
    )
    # Each turn made two model calls (the calculator, then the answer) and took some time.
    calls = "jarvis_model_call_seconds_count"
    assert sample(after, calls) - sample(before, calls) == 4
    duration = "jarvis_turn_duration_seconds_count"
    assert sample(after, duration) - sample(before, duration) == 2
    assert sample(after, "jarvis_events_sent_total") > sample(before, "jarvis_events_sent_total")
