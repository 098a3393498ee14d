"""Each channel against its fake: what a receiver's answer does to the delivery — a browser
that unsubscribed, a redirect, a rate limit, a host no longer allowed (docs/design.md §16)."""

import pytest

from notices_app.channels.preferences import notice_settings_update, push_subscription_add
from notices_app.delivery import notice_send
from notices_app.models import NoticeOutbox, PushSubscription
from sessions_app.services import notices, sessions
from tests.notices_app.schedules.conftest import (
    fan_out_notices,
    run_due_tasks,
    run_worker_until,
)

from .conftest import PushBrowser, allow

pytestmark = pytest.mark.django_db(transaction=True)


def subscribe(owner_id: int, browser: PushBrowser) -> PushSubscription:
    subscription = browser.to_json()
    return push_subscription_add(
        owner_id=owner_id, endpoint=subscription["endpoint"], **subscription["keys"]
    )[0]


def notify(owner_id: int, content: str = "hello", session_id: str = "chat-1") -> None:
    sessions.session_create(owner_id=owner_id, session_id=session_id)
    notices.proactive_add(session_id=session_id, message_id="m1", content=content)


def row(channel: str) -> NoticeOutbox:
    return NoticeOutbox.objects.get(channel=channel)


def test_every_subscribed_browser_gets_its_own_push(settings, alice, vapid, fake):
    push = fake()
    allow(settings, push)
    phone, laptop = PushBrowser(push.url("/phone")), PushBrowser(push.url("/laptop"))
    subscribe(alice.id, phone)
    subscribe(alice.id, laptop)
    notify(alice.id, "Reminder: stretch 🧘")

    run_due_tasks()

    by_path = {received.path: received for received in push.received}
    assert phone.decrypt(by_path["/phone"].body)["content"] == "Reminder: stretch 🧘"
    assert laptop.decrypt(by_path["/laptop"].body)["content"] == "Reminder: stretch 🧘"


def test_a_long_notice_is_cut_to_what_a_push_service_takes(settings, alice, vapid, fake):
    push = fake()
    allow(settings, push)
    phone = PushBrowser(push.url("/phone"))
    subscribe(alice.id, phone)
    notify(alice.id, "🧘" * 5000)  # 20,000 bytes of text

    run_due_tasks()

    (pushed,) = push.received
    assert len(pushed.body) <= 4096  # RFC 8030: what every push service must accept
    content = phone.decrypt(pushed.body)["content"]
    assert content.endswith("…") and set(content[:-1]) == {"🧘"} and len(content) > 900


def test_a_browser_that_unsubscribed_is_forgotten(settings, alice, vapid, fake):
    push = fake((410, {}, b"gone"))
    allow(settings, push)
    subscribe(alice.id, PushBrowser(push.url("/old-phone")))
    notify(alice.id)

    run_due_tasks()

    assert row("webpush").state == "failed"
    assert not PushSubscription.objects.exists()


def test_a_redirect_is_never_followed(settings, alice, vapid, fake):
    elsewhere = fake()
    discord = fake((302, {"Location": elsewhere.url("/internal")}, b""))
    allow(settings, discord, elsewhere)
    notice_settings_update(owner_id=alice.id, discord_webhook_url=discord.url("/api/webhooks/1"))
    settings.NOTIFY_RETRY_BASE_SEC = 3600
    notify(alice.id)

    run_due_tasks()

    assert len(discord.received) == 1 and elsewhere.received == []
    assert row("discord").state == "pending" and "HTTP 302" in row("discord").last_error


def test_discord_rate_limit_is_waited_out(settings, alice, vapid, fake):
    discord = fake((429, {"Content-Type": "application/json"}, b'{"retry_after": 0.05}'))
    allow(settings, discord)
    notice_settings_update(owner_id=alice.id, discord_webhook_url=discord.url("/api/webhooks/1"))
    notify(alice.id, "x" * 2500)

    run_worker_until(lambda: row("discord").state == "sent")

    assert len(discord.received) == 2
    content = discord.received[1].json()["content"]
    assert len(content) == 2000 and content.endswith("…")  # Discord's own limit


def test_a_deleted_discord_webhook_is_not_retried(settings, alice, vapid, fake):
    discord = fake((404, {}, b'{"message": "Unknown Webhook"}'))
    allow(settings, discord)
    notice_settings_update(owner_id=alice.id, discord_webhook_url=discord.url("/api/webhooks/1"))
    notify(alice.id)

    run_due_tasks()

    assert row("discord").state == "failed" and len(discord.received) == 1


def test_a_host_no_longer_allowed_is_not_sent_to(settings, alice, vapid, fake):
    push = fake()
    allow(settings, push)
    subscribe(alice.id, PushBrowser(push.url("/phone")))
    notify(alice.id)
    fan_out_notices()
    settings.OUTBOUND_URL_ALLOWLIST = ["fcm.googleapis.com"]  # the operator narrowed it since

    assert notice_send(outbox_id=row("webpush").id) == "failed"
    assert push.received == []
    assert "OUTBOUND_URL_ALLOWLIST" in row("webpush").last_error


def test_a_channel_turned_off_gets_nothing(settings, alice, vapid, fake):
    push, discord = fake(), fake()
    allow(settings, push, discord)
    subscribe(alice.id, PushBrowser(push.url("/phone")))
    notice_settings_update(
        owner_id=alice.id,
        discord_webhook_url=discord.url("/api/webhooks/1"),
        discord_enabled=False,
        webpush_enabled=False,
    )
    notify(alice.id)

    run_due_tasks()

    assert push.received == discord.received == []
    assert not NoticeOutbox.objects.exists()
