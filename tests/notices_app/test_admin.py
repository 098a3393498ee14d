"""The admin shows schedules, deliveries and channel settings read-only, and never shows a
user's secrets (the Discord webhook token, a push endpoint's path)."""

import pytest

from notices_app.channels.preferences import notice_settings_update, push_subscription_add
from notices_app.models import NoticeOutbox, NoticeSettings, PushSubscription, Schedule
from notices_app.services.schedules import schedule_create
from sessions_app.services import notices, sessions

from .channels.conftest import PushBrowser
from .schedules.conftest import fan_out_notices

pytestmark = pytest.mark.django_db

DISCORD = "https://discord.com/api/webhooks/123/the-secret-token"
ENDPOINT = "https://fcm.googleapis.com/fcm/send/the-browser-capability"


def test_the_pages_list_what_there_is_and_change_nothing(admin_client, alice, settings):
    settings.NOTIFY_WEBHOOK_URL = "https://ops.example.com/hook"
    sessions.session_create(owner_id=alice.id, session_id="chat-1")
    schedule_create(owner_id=alice.id, session_id="chat-1", text="stretch", in_seconds=60)
    notices.proactive_add(session_id="chat-1", message_id="m1", content="hello")
    fan_out_notices()
    notice_settings_update(owner_id=alice.id, discord_webhook_url=DISCORD)
    subscription = PushBrowser(ENDPOINT).to_json()
    push_subscription_add(owner_id=alice.id, endpoint=ENDPOINT, **subscription["keys"])

    pages = {
        model: admin_client.get(f"/admin/notices_app/{model._meta.model_name}/")
        for model in (Schedule, NoticeOutbox, NoticeSettings, PushSubscription)
    }
    assert {model: page.status_code for model, page in pages.items()} == dict.fromkeys(pages, 200)
    assert b"stretch" in pages[Schedule].content
    assert b"webhook" in pages[NoticeOutbox].content
    assert b"fcm.googleapis.com" in pages[PushSubscription].content
    for model, page in pages.items():
        assert b"the-secret-token" not in page.content
        assert b"the-browser-capability" not in page.content
        add = f"/admin/notices_app/{model._meta.model_name}/add/"
        assert add.encode() not in page.content
        assert admin_client.get(add).status_code == 403
