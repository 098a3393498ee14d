"""Staff read what the agent learned and judge the procedures it drafted — nothing else.

Memory rows are written by memory_app's services alone: the admin shows every list and
detail page, refuses every add, change and delete (403) even to a superuser or a staff user
holding every memory permission, and its only writes are the procedure actions.
"""

import pytest
from django.contrib.auth.models import Permission
from django.urls import reverse

from memory_app.models import (
    CompactionSummary,
    Episode,
    Procedure,
    ProfileFact,
    ThoughtLog,
    WorkingMemory,
)
from memory_app.services import memory_consolidate, working_memory_remember
from sessions_app.services.compaction import compaction_append
from tests.builders import arithmetic_turn, play_turn

pytestmark = pytest.mark.django_db

MODELS = {
    "episode": Episode,
    "thoughtlog": ThoughtLog,
    "workingmemory": WorkingMemory,
    "profilefact": ProfileFact,
    "procedure": Procedure,
    "compactionsummary": CompactionSummary,
}


@pytest.fixture
def superuser_client(client, admin_user):
    client.force_login(admin_user)
    return client


@pytest.fixture
def memory_staff_client(client, django_user_model):
    """A staff user who holds every permission of memory_app, add/change/delete included."""
    staff = django_user_model.objects.create_user("keeper", password="pw-keeper-123", is_staff=True)
    staff.user_permissions.set(Permission.objects.filter(content_type__app_label="memory_app"))
    client.force_login(staff)
    return client


@pytest.fixture(params=["superuser", "memory staff"])
def staff_client(request):
    fixture = "superuser_client" if request.param == "superuser" else "memory_staff_client"
    return request.getfixturevalue(fixture)


def drafted(owner, kind_session="s-admin"):
    for expression in ("1+1", "2+2", "3+3"):
        arithmetic_turn(kind_session, expression, "x", owner_id=owner.id)
    memory_consolidate(session_id=kind_session)
    return Procedure.objects.get(owner=owner)


@pytest.fixture
def one_of_each(alice):
    """A row of every memory model, as the agent leaves them."""
    play_turn("s-admin", "My name is Alice", "Hi", owner_id=alice.id)
    procedure = drafted(alice)
    working_memory_remember(session_id="s-admin", key="locker", value="4711")
    compaction_append(session_id="s-admin")
    rows = {name: model.objects.order_by("pk").first() for name, model in MODELS.items()}
    assert all(rows.values()), rows
    assert rows["procedure"] == procedure
    return rows


def url(name: str, view: str, *args) -> str:
    return reverse(f"admin:memory_app_{name}_{view}", args=args)


@pytest.mark.parametrize(("action", "status"), [("approve", "approved"), ("reject", "rejected")])
def test_the_procedure_actions_judge_drafts(staff_client, alice, action, status):
    procedure = drafted(alice)
    response = staff_client.post(
        url("procedure", "changelist"),
        {"action": action, "_selected_action": [procedure.pk]},
        follow=True,
    )
    assert response.status_code == 200
    procedure.refresh_from_db()
    assert procedure.status == status
    assert procedure.decided_at is not None
    assert f"{status.capitalize()} 1 procedure(s)." in response.content.decode()


def test_every_memory_page_opens_and_shows_what_was_learned(staff_client, one_of_each):
    for name in MODELS:
        assert staff_client.get(url(name, "changelist")).status_code == 200, name
        detail = staff_client.get(url(name, "change", one_of_each[name].pk))
        assert detail.status_code == 200, name
        assert 'name="_save"' not in detail.content.decode(), f"{name} offers a save button"
    procedure = staff_client.get(url("procedure", "change", one_of_each["procedure"].pk))
    assert "calculator" in procedure.content.decode()
    episode = staff_client.get(url("episode", "change", one_of_each["episode"].pk))
    assert "My name is Alice" in episode.content.decode()


def test_no_memory_row_can_be_added_changed_or_deleted(staff_client, one_of_each):
    before = {name: model.objects.count() for name, model in MODELS.items()}
    for name, row in one_of_each.items():
        assert staff_client.get(url(name, "add")).status_code == 403, name
        assert staff_client.post(url(name, "add"), {}).status_code == 403, name
        assert staff_client.post(url(name, "change", row.pk), {}).status_code == 403, name
        assert staff_client.get(url(name, "delete", row.pk)).status_code == 403, name
        assert staff_client.post(url(name, "delete", row.pk), {"post": "yes"}).status_code == 403

        listing = staff_client.get(url(name, "changelist")).content.decode()
        assert "delete_selected" not in listing, f"{name} offers the bulk delete"
        staff_client.post(
            url(name, "changelist"),
            {"action": "delete_selected", "_selected_action": [row.pk], "post": "yes"},
        )
    assert {name: model.objects.count() for name, model in MODELS.items()} == before
    assert WorkingMemory.objects.get().value == "4711"


def test_the_procedures_offer_only_their_judging_actions(staff_client, one_of_each):
    listing = staff_client.get(url("procedure", "changelist"))
    actions = [choice for choice, _ in listing.context["action_form"].fields["action"].choices]
    assert actions == ["", "approve", "reject"]
