"""A socket's heartbeat renews its registry row, and says when the row is gone (swept, or
its session deleted): the socket then closes so the page reconnects."""

from datetime import timedelta

import pytest
from django.utils import timezone

from sessions_app.models import LiveConnection
from sessions_app.store import connections as registry
from sessions_app.store import get_store

pytestmark = pytest.mark.django_db


def test_a_heartbeat_renews_its_row_and_no_other(alice):
    get_store().create("s1", owner_id=alice.id)
    long_ago = timezone.now() - timedelta(minutes=5)
    for channel_name in ("tab-1", "tab-2"):
        LiveConnection.objects.create(
            session_id="s1",
            channel_name=channel_name,
            user=alice,
            connected_at=long_ago,
            heartbeat_at=long_ago,
            worker_id="",
        )
    assert registry.renew(channel_name="tab-1") is True
    beats = dict(LiveConnection.objects.values_list("channel_name", "heartbeat_at"))
    assert beats["tab-1"] > timezone.now() - timedelta(minutes=1)
    assert beats["tab-2"] == long_ago


def test_a_heartbeat_of_a_row_that_is_gone_says_so(alice):
    assert registry.renew(channel_name="swept-tab") is False
    assert not LiveConnection.objects.exists()
