"""Staff read what the agent learned and judge the procedures it drafted."""

import pytest
from django.urls import reverse

from memory_app.models import Procedure
from memory_app.services import memory_consolidate
from tests.builders import arithmetic_turn, play_turn

pytestmark = pytest.mark.django_db


@pytest.fixture
def staff_client(client, admin_user):
    client.force_login(admin_user)
    return client


def drafted(owner, kind_session="s-admin"):
    for expression in ("1+1", "2+2", "3+3"):
        arithmetic_turn(kind_session, expression, "x", owner_id=owner.id)
    memory_consolidate(session_id=kind_session)
    return Procedure.objects.get(owner=owner)


@pytest.mark.parametrize(("action", "status"), [("approve", "approved"), ("reject", "rejected")])
def test_the_procedure_actions_judge_drafts(staff_client, alice, action, status):
    procedure = drafted(alice)
    response = staff_client.post(
        reverse("admin:memory_app_procedure_changelist"),
        {"action": action, "_selected_action": [procedure.pk]},
        follow=True,
    )
    assert response.status_code == 200
    procedure.refresh_from_db()
    assert procedure.status == status
    assert procedure.decided_at is not None
    assert f"{status.capitalize()} 1 procedure(s)." in response.content.decode()


def test_every_memory_page_opens(staff_client, alice):
    play_turn("s-admin", "My name is Alice", "Hi", owner_id=alice.id)
    procedure = drafted(alice)
    for model in (
        "episode",
        "thoughtlog",
        "workingmemory",
        "profilefact",
        "procedure",
        "compactionsummary",
    ):
        url = reverse(f"admin:memory_app_{model}_changelist")
        assert staff_client.get(url).status_code == 200, url
    change = reverse("admin:memory_app_procedure_change", args=[procedure.pk])
    assert "calculator" in staff_client.get(change).content.decode()
    episode = procedure.source_episode_ids[0]
    assert (
        staff_client.get(reverse("admin:memory_app_episode_change", args=[episode])).status_code
        == 200
    )
