"""`DELETE /api/me/` and `delete_user_data` (docs/design.md §21): the account and everything
it owns go, and no row of any model names the user afterwards; another user's data stays;
a turn running refuses it; a rerun after a crash finishes the job."""

from io import StringIO

import pytest
from django.apps import apps
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.db import models

from accounts_app.retention import retention_days_set
from memory_app.services import memory_consolidate
from notices_app.channels.preferences import notice_settings_update, push_subscription_add
from notices_app.services.schedules import schedule_create
from sessions_app.runtime.turn.lease import TurnLease
from sessions_app.runtime.turn.turns import turn_run
from sessions_app.services import notices, sessions
from sessions_app.store import get_store
from tests.notices_app.channels.conftest import PushBrowser

pytestmark = pytest.mark.django_db

DISCORD = "https://discord.com/api/webhooks/123/token"


def _owner_fields(model) -> list[str]:
    """The columns of a model that name a user: relations to the user model, and plain
    owner_id / user_id columns."""
    user_model = get_user_model()
    names = []
    for field in model._meta.concrete_fields:
        if isinstance(field, models.ForeignKey) and field.related_model is user_model:
            names.append(field.attname)
        elif field.name in ("owner_id", "user_id"):
            names.append(field.name)
    if model is user_model:
        names.append("pk")
    return names


def _rows_naming(user_id: int) -> dict[str, int]:
    found = {}
    for model in apps.get_models():
        for name in _owner_fields(model):
            count = model._default_manager.filter(**{name: user_id}).count()
            if count:
                found[f"{model._meta.label}.{name}"] = count
    return found


def _everything_of(user, session_id: str) -> None:
    sessions.session_create(session_id=session_id, owner_id=user.id)
    turn_run(session_id=session_id, text="My name is Sam. ask researcher to find tea shops")
    turn_run(session_id=session_id, text="remember that my locker code is 4411")
    memory_consolidate(session_id=session_id)
    sessions.session_export(session_id=session_id, owner_id=user.id, fmt="md")
    schedule_create(owner_id=user.id, session_id=session_id, text="stretch", in_seconds=600)
    notices.proactive_add(session_id=session_id, message_id="m1", content="hello")
    notice_settings_update(owner_id=user.id, discord_webhook_url=DISCORD)
    endpoint = f"https://fcm.googleapis.com/fcm/send/{user.username}"
    push_subscription_add(
        owner_id=user.id, endpoint=endpoint, **PushBrowser(endpoint).to_json()["keys"]
    )
    retention_days_set(owner_id=user.id, retention_days=90)


def test_delete_me_leaves_no_row_naming_the_user_and_keeps_another_users_data(
    backend, api, alice, bob, settings
):
    _everything_of(alice, "alice-chat")
    _everything_of(bob, "bob-chat")
    assert len(_rows_naming(alice.id)) >= 8  # the test sees what there is to delete
    bob_rows = _rows_naming(bob.id)
    bob_entries = len(get_store().get_messages("bob-chat"))

    answer = api.delete("/api/me/", {"confirm": "alice"}, format="json")

    assert answer.status_code == 204
    assert _rows_naming(alice.id) == {}
    assert get_store().get_meta("alice-chat") is None
    assert not (settings.EXPORTS_DIR / str(alice.id)).exists()
    assert _rows_naming(bob.id) == bob_rows
    assert len(get_store().get_messages("bob-chat")) == bob_entries
    assert (settings.EXPORTS_DIR / str(bob.id)).exists()
    # The token is gone with the account.
    assert api.get("/api/me/").status_code == 401


def test_without_the_username_as_confirmation_nothing_is_deleted(api, alice):
    sessions.session_create(session_id="alice-chat", owner_id=alice.id)
    for body in (
        {},
        {"confirm": "bob"},
        {"confirm": "ALICE"},
        {"confirm": " alice\n"},
        {"confirm": "alice "},
        {"confirm": "\talice"},
    ):
        answer = api.delete("/api/me/", body, format="json")
        assert answer.status_code == 400
        assert answer.json()["code"] in ("invalid", "confirmation_mismatch")
    assert get_store().get_meta("alice-chat") is not None
    assert get_user_model().objects.get(pk=alice.pk).is_active


def test_a_running_turn_refuses_the_delete_with_409_and_changes_nothing(api, alice):
    sessions.session_create(session_id="alice-chat", owner_id=alice.id)
    lease = TurnLease.for_session("alice-chat").acquire(wait_sec=0)
    try:
        answer = api.delete("/api/me/", {"confirm": "alice"}, format="json")
    finally:
        lease.release()
    assert answer.status_code == 409 and answer.json()["code"] == "session_busy"
    assert get_user_model().objects.get(pk=alice.pk).is_active
    assert get_store().get_meta("alice-chat") is not None


def test_a_rerun_after_a_crash_finishes_the_job(alice, monkeypatch):
    _everything_of(alice, "alice-chat")

    def crash(*, owner_id):
        raise RuntimeError("the worker was killed")

    monkeypatch.setattr("accounts_app.deletion.schedules_purge_for_owner", crash)
    with pytest.raises(RuntimeError):
        call_command("delete_user_data", "--user", "alice", stdout=StringIO())
    half_done = get_user_model().objects.get(pk=alice.pk)
    assert not half_done.is_active  # no login while the rest waits
    assert get_store().get_meta("alice-chat") is None
    monkeypatch.undo()

    out = StringIO()
    call_command("delete_user_data", "--user", "alice", stdout=out)
    assert "deleted user 'alice'" in out.getvalue()
    assert _rows_naming(alice.id) == {}
    again = StringIO()
    call_command("delete_user_data", "--user", "alice", stdout=again)
    assert "nothing to delete" in again.getvalue()
