"""The admin lets staff read sessions and their entries, and never write a history."""

import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from sessions_app.models import Entry, LiveConnection, ProactiveNotice, Session
from sessions_app.store import NewEntry
from sessions_app.store.db import DbSessionStore
from tests.builders import assistant, call, result, user

pytestmark = pytest.mark.django_db

SESSIONS_URL = reverse("admin:sessions_app_session_changelist")


@pytest.fixture
def store():
    return DbSessionStore()


def a_turn(question="what is 2+2?"):
    return [
        user(question),
        assistant(calls=[call("call_1")]),
        result("call_1"),
        assistant("It is 4."),
    ]


def listed_ids(response) -> list[str]:
    return [session.id for session in response.context["cl"].result_list]


def test_changelist_shows_each_session_with_its_entry_count(admin_client, store, alice):
    store.create("busy", owner_id=alice.id, title="arithmetic")
    store.append("busy", a_turn())
    store.append("busy", a_turn("and 3+3?"))
    store.create("quiet")

    response = admin_client.get(SESSIONS_URL)

    assert response.status_code == 200
    counts = {session.id: session.entry_count for session in response.context["cl"].result_list}
    assert counts == {"busy": 8, "quiet": 0}
    html = response.content.decode()
    assert "arithmetic" in html and "alice" in html


def test_changelist_counts_entries_in_the_listing_query_not_per_row(admin_client, store):
    def queries_for_listing() -> int:
        with CaptureQueriesContext(connection) as queries:
            assert admin_client.get(SESSIONS_URL).status_code == 200
        return len(queries.captured_queries)

    for number in range(2):
        store.create(f"few-{number}")
        store.append(f"few-{number}", a_turn())
    with_two = queries_for_listing()
    for number in range(20):
        store.create(f"many-{number}")
        store.append(f"many-{number}", a_turn())
    assert queries_for_listing() == with_two


def test_search_by_id_agent_and_owner_username(admin_client, store, alice):
    store.create("alice-chat", owner_id=alice.id)
    store.create("coder-work", agent="coder")
    store.create("system-job")

    assert listed_ids(admin_client.get(SESSIONS_URL, {"q": "alice"})) == ["alice-chat"]
    assert listed_ids(admin_client.get(SESSIONS_URL, {"q": "coder"})) == ["coder-work"]
    assert listed_ids(admin_client.get(SESSIONS_URL, {"q": "system-job"})) == ["system-job"]
    assert listed_ids(admin_client.get(SESSIONS_URL, {"q": "nobody"})) == []


def test_filter_by_agent_and_by_having_a_parent(admin_client, store):
    store.create("root")
    store.append("root", a_turn())
    store.create_branch("root", new_id="branch")
    store.create("helper", agent="coder")

    assert listed_ids(admin_client.get(SESSIONS_URL, {"has_parent": "yes"})) == ["branch"]
    assert sorted(listed_ids(admin_client.get(SESSIONS_URL, {"has_parent": "no"}))) == [
        "helper",
        "root",
    ]
    assert listed_ids(admin_client.get(SESSIONS_URL, {"agent": "coder"})) == ["helper"]


def test_session_page_shows_entries_in_seq_order_with_legible_tool_calls(admin_client, store):
    store.create("s1")
    # One batch shares one created_at: only seq can order these (docs/design.md §3).
    store.append("s1", a_turn("first question"))
    store.append("s1", [NewEntry(role="user", content="second question")])

    response = admin_client.get(reverse("admin:sessions_app_session_change", args=["s1"]))

    assert response.status_code == 200
    html = response.content.decode()
    positions = [html.index(text) for text in ("first question", "It is 4.", "second question")]
    assert positions == sorted(positions)
    assert re.search(r"<pre[^>]*>\{\n  &quot;expression&quot;: &quot;2\+2&quot;\n\}</pre>", html)
    assert 'name="_save"' not in html


def test_entries_cannot_be_added_changed_or_deleted(admin_client, store):
    store.create("s1")
    store.append("s1", a_turn())
    entry = Entry.objects.get(session_id="s1", seq=2)
    change_url = reverse("admin:sessions_app_entry_change", args=[entry.pk])

    assert admin_client.get(reverse("admin:sessions_app_entry_add")).status_code == 403
    page = admin_client.get(change_url)
    assert page.status_code == 200
    assert 'name="_save"' not in page.content.decode()
    assert "calculator" in page.content.decode()
    assert admin_client.post(change_url, {"content": "rewritten"}).status_code == 403
    delete_url = reverse("admin:sessions_app_entry_delete", args=[entry.pk])
    assert admin_client.post(delete_url, {"post": "yes"}).status_code == 403
    assert Entry.objects.get(pk=entry.pk).content == ""
    assert Entry.objects.filter(session_id="s1").count() == 4


def test_entry_list_is_in_seq_order(admin_client, store):
    store.create("s1")
    store.append("s1", a_turn())
    response = admin_client.get(
        reverse("admin:sessions_app_entry_changelist"), {"session__id__exact": "s1"}
    )
    assert response.status_code == 200
    assert [entry.seq for entry in response.context["cl"].result_list] == [1, 2, 3, 4]


def test_sessions_cannot_be_added_edited_or_deleted_in_admin(admin_client, store):
    store.create("s1", title="kept")
    add_url = reverse("admin:sessions_app_session_add")
    change_url = reverse("admin:sessions_app_session_change", args=["s1"])
    delete_url = reverse("admin:sessions_app_session_delete", args=["s1"])

    assert admin_client.get(add_url).status_code == 403
    assert admin_client.post(change_url, {"title": "changed", "agent": "coder"}).status_code == 403
    assert admin_client.post(delete_url, {"post": "yes"}).status_code == 403
    session = Session.objects.get(id="s1")
    assert (session.title, session.agent) == ("kept", "jarvis")


def test_notices_and_live_connections_are_readable(admin_client, store, alice):
    from django.utils import timezone

    store.create("s1")
    store.append_proactive("s1", "reminder-1", "Time to stretch")
    now = timezone.now()
    LiveConnection.objects.create(
        session_id="s1",
        channel_name="specific.abc!123",
        user=alice,
        connected_at=now,
        heartbeat_at=now,
    )

    notices = admin_client.get(reverse("admin:sessions_app_proactivenotice_changelist"))
    assert notices.status_code == 200
    assert "reminder-1" in notices.content.decode()
    notice = ProactiveNotice.objects.get()
    page = admin_client.get(reverse("admin:sessions_app_proactivenotice_change", args=[notice.pk]))
    assert page.status_code == 200 and "Time to stretch" in page.content.decode()

    connections = admin_client.get(reverse("admin:sessions_app_liveconnection_changelist"))
    assert connections.status_code == 200
    assert "specific.abc!123" in connections.content.decode()
