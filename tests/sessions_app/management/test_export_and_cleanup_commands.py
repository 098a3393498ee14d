"""The operator's commands around the API: export a session, sweep dead connections."""

from datetime import timedelta

import pytest
from django.conf import settings
from django.core.management import CommandError, call_command
from django.utils import timezone

from sessions_app.models import LiveConnection
from sessions_app.services import connections as connection_services
from sessions_app.store import NewEntry, connections, get_store

pytestmark = pytest.mark.django_db


def test_export_session_writes_the_same_file_as_the_api(api, alice, capsys):
    get_store().create("work:1", owner_id=alice.id)
    get_store().append("work:1", [NewEntry(role="user", content="hello there")])
    call_command("export_session", "work:1", "--format", "json")
    path = settings.EXPORTS_DIR / str(alice.id) / "work_1.json"
    assert capsys.readouterr().out.strip() == str(path)
    assert api.get("/api/sessions/work:1/export/?format=json").content.decode() == path.read_text()
    with pytest.raises(CommandError):
        call_command("export_session", "missing")


def test_cleanup_sessions_removes_only_connections_of_dead_workers(alice, backend, capsys):
    get_store().create("s1", owner_id=alice.id)
    connection_services.connection_open(session_id="s1", channel_name="alive", user_id=alice.id)
    connection_services.connection_open(session_id="s1", channel_name="dead", user_id=alice.id)
    LiveConnection.objects.filter(channel_name="dead").update(
        heartbeat_at=timezone.now() - timedelta(seconds=connections.LIVE_TIMEOUT_SEC + 5)
    )
    call_command("cleanup_sessions", "connections", "confirm", "--all-users")
    assert "removed 1" in capsys.readouterr().out
    assert list(LiveConnection.objects.values_list("channel_name", flat=True)) == ["alive"]
