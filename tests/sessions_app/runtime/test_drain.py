"""A draining worker starts no new turn, and stores nothing for a prompt it refuses; the
turns already running finish, sub-agent turns they start included (docs/design.md §19)."""

import pytest

from sessions_app.runtime.loop import drain
from sessions_app.store import get_store

pytestmark = pytest.mark.django_db


def test_a_prompt_to_a_draining_worker_is_refused_with_503_and_nothing_is_stored(api, monkeypatch):
    assert api.post("/api/sessions/", {"id": "late"}, format="json").status_code == 201
    monkeypatch.setattr(drain, "_draining", True)
    answer = api.post("/api/sessions/late/messages/", {"text": "what is 2+3?"}, format="json")
    assert answer.status_code == 503
    assert answer.json()["code"] == "draining"
    assert get_store().get_messages("late") == []


def test_a_turn_started_by_a_running_turn_runs_while_draining(monkeypatch):
    with drain.turn_admitted("parent"):
        monkeypatch.setattr(drain, "_draining", True)
        with drain.turn_admitted("sub-agent"):  # a delegation: part of the parent's work
            assert drain.turns_running() == 2
    assert drain.turns_running() == 0
    with pytest.raises(drain.Draining), drain.turn_admitted("new"):
        pass
