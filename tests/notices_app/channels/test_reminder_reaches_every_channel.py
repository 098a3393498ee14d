"""A reminder set in a real conversation reaches the person through every channel — a Web
Push endpoint (payload decrypted with the subscription's keys), the operator's webhook and
their Discord webhook — once each; a test session's reaches none; a channel that fails holds
up no other (docs/design.md §14, §16)."""

import pytest

from notices_app.channels.preferences import notice_settings_update, push_subscription_add
from notices_app.models import NoticeOutbox, Schedule
from sessions_app.runtime.turn.turns import turn_run
from sessions_app.services import sessions
from sessions_app.store import get_store
from tests.notices_app.schedules.conftest import make_due, run_due_tasks

from .conftest import PushBrowser, allow, vapid_signer_of

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def channels(settings, alice, vapid, fake):
    """Alice with all three channels pointed at fakes: (push, browser, webhook, discord)."""
    push, webhook, discord = fake(), fake(), fake()
    allow(settings, push, webhook, discord)
    settings.NOTIFY_WEBHOOK_URL = webhook.url("/notices")
    browser = PushBrowser(push.url("/push/alice-phone"))
    push_subscription_add(owner_id=alice.id, **flat(browser.to_json()))
    notice_settings_update(owner_id=alice.id, discord_webhook_url=discord.url("/api/webhooks/1/x"))
    return push, browser, webhook, discord


def flat(subscription: dict) -> dict:
    return {"endpoint": subscription["endpoint"], **subscription["keys"]}


def set_reminder(session_id: str, owner_id: int) -> Schedule:
    """The person asks the offline model in a real turn; the run is then made due now."""
    sessions.session_create(owner_id=owner_id, session_id=session_id)
    turn_run(session_id=session_id, owner_id=owner_id, text="remind me in 1 seconds to stretch")
    schedule = Schedule.objects.get(session_id=session_id)
    make_due(schedule)
    return schedule


def test_a_reminder_reaches_push_webhook_and_discord_once_each(alice, channels, vapid):
    push, browser, webhook, discord = channels
    set_reminder("chat-1", alice.id)

    run_due_tasks()
    run_due_tasks()  # a second pass finds nothing more to send

    (pushed,) = push.received
    assert pushed.path == "/push/alice-phone"
    assert pushed.headers["Content-Encoding"] == "aes128gcm"
    assert vapid_signer_of(pushed.headers["Authorization"]) == vapid["VAPID_PUBLIC_KEY"]
    sent = browser.decrypt(pushed.body)
    assert sent["content"] == "Reminder: stretch"
    assert sent["session_id"] == "chat-1"
    assert sent["message_id"].startswith("schedule:")

    (posted,) = webhook.received
    assert posted.json()["content"] == "Reminder: stretch"
    (said,) = discord.received
    assert said.json() == {"content": "Reminder: stretch"}

    (notice,) = get_store().get_proactive("chat-1")
    assert notice.delivered_at is not None


def test_a_test_sessions_reminder_reaches_no_channel(alice, channels):
    push, _, webhook, discord = channels
    set_reminder("test-probe", alice.id)

    run_due_tasks()

    assert [c.content for c in get_store().get_proactive("test-probe")] == ["Reminder: stretch"]
    assert push.received == webhook.received == discord.received == []
    assert not NoticeOutbox.objects.exists()


def test_a_failing_channel_holds_up_no_other(alice, channels, settings):
    push, browser, webhook, discord = channels
    settings.NOTIFY_RETRY_BASE_SEC = 3600  # the failed one waits; the others do not
    discord.replies = [(500, {}, b"down")]
    set_reminder("chat-1", alice.id)

    run_due_tasks()

    assert browser.decrypt(push.received[0].body)["content"] == "Reminder: stretch"
    assert webhook.received[0].json()["content"] == "Reminder: stretch"
    assert len(discord.received) == 1
    states = dict(NoticeOutbox.objects.values_list("channel", "state"))
    assert states == {"webpush": "sent", "webhook": "sent", "discord": "pending"}
