"""`/api/me/` and `/api/me/push-subscriptions/`: the caller's channel settings; URLs the
server would send to are held to OUTBOUND_URL_ALLOWLIST and a refusal changes nothing
(docs/design.md §16)."""

import pytest
from rest_framework.test import APIClient

from notices_app.models import NoticeSettings, PushSubscription

from .channels.conftest import PushBrowser

pytestmark = pytest.mark.django_db

DISCORD = "https://discord.com/api/webhooks/123/secret-token"
FCM = "https://fcm.googleapis.com/fcm/send/abc:def"


def test_the_defaults(api):
    assert api.get("/api/me/").json() == {
        "username": "alice",
        "discord_webhook_url": "",
        "channels": {"webhook": False, "webpush": True, "discord": True},
        "push_subscriptions": [],
        "retention_days": None,
        "retention_default_days": None,
        "test_session_retention_days": 7,
        "memory_in_context": True,
    }


def test_the_discord_url_and_the_channels_are_changed_together(api, settings):
    settings.NOTIFY_WEBHOOK_URL = "https://ops.example.com/hook"
    answer = api.patch(
        "/api/me/",
        {"discord_webhook_url": DISCORD, "channels": {"webpush": False}},
        format="json",
    )
    assert answer.status_code == 200, answer.json()
    assert answer.json()["discord_webhook_url"] == DISCORD
    assert answer.json()["channels"] == {"webhook": True, "webpush": False, "discord": True}
    assert api.get("/api/me/").json() == answer.json()
    assert api.patch("/api/me/", {"discord_webhook_url": ""}, format="json").status_code == 200
    assert NoticeSettings.objects.get().discord_webhook_url == ""


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:8000/api/sessions/",
        "http://169.254.169.254/",
        "https://example.com/x",
        # Allowed host, but: not https; a tab, CR/LF; a backslash (docs/design.md §27).
        "http://discord.com/api/webhooks/123/secret-token",
        "https://discord.com/api/webhooks/123/secret-token\t",
        "https://discord.com/api/webhooks/123/secret-token\r\n",
        "https://disc\tord.com/api/webhooks/123/secret-token",
        "https://evil.example\\.discord.com/api/webhooks/1",
    ],
)
def test_a_discord_url_on_another_host_is_refused_and_nothing_changes(api, url):
    api.patch("/api/me/", {"discord_webhook_url": DISCORD}, format="json")
    refused = api.patch(
        "/api/me/", {"discord_webhook_url": url, "channels": {"discord": False}}, format="json"
    )
    assert refused.status_code == 400
    assert refused.json()["code"] == "url_not_allowed"
    me = api.get("/api/me/").json()
    assert (me["discord_webhook_url"], me["channels"]["discord"]) == (DISCORD, True)


@pytest.mark.parametrize(
    "body",
    [
        {"username": "mallory"},
        {"channels": {"webpush": "maybe"}},
        {"channels": {"webhook": False}},
        {"theme": "dark"},
        ["x"],
    ],
)
def test_what_is_not_a_setting_is_a_400(api, body):
    answer = api.patch("/api/me/", body, format="json")
    assert answer.status_code == 400 and answer.json()["code"] == "invalid"
    assert api.get("/api/me/").json()["username"] == "alice"


def test_a_browser_subscribes_and_unsubscribes(api, bob_api):
    browser = PushBrowser(FCM)
    created = api.post("/api/me/push-subscriptions/", browser.to_json(), format="json")
    assert created.status_code == 201
    (subscription_id,) = created.json().values()
    again = api.post("/api/me/push-subscriptions/", browser.to_json(), format="json")
    assert (again.status_code, again.json()) == (200, {"id": subscription_id})
    assert [s["id"] for s in api.get("/api/me/").json()["push_subscriptions"]] == [subscription_id]

    gone = bob_api.delete(f"/api/me/push-subscriptions/{subscription_id}/")
    assert (gone.status_code, gone.json()["code"]) == (404, "not_found")
    assert api.delete(f"/api/me/push-subscriptions/{subscription_id}/").status_code == 204
    assert not PushSubscription.objects.exists()


@pytest.mark.parametrize("endpoint", ["http://127.0.0.1:6379/", f"{FCM}\r\n", f"{FCM}\t"])
def test_a_push_endpoint_on_another_host_is_refused(api, endpoint):
    browser = PushBrowser(endpoint)
    refused = api.post("/api/me/push-subscriptions/", browser.to_json(), format="json")
    assert (refused.status_code, refused.json()["code"]) == (400, "url_not_allowed")
    assert not PushSubscription.objects.exists()


@pytest.mark.parametrize(
    "keys", [{"p256dh": "not-a-key", "auth": "AAAAAAAAAAAAAAAAAAAAAA"}, {"p256dh": "x"}]
)
def test_keys_that_are_not_a_browsers_are_refused(api, keys):
    refused = api.post(
        "/api/me/push-subscriptions/", {"endpoint": FCM, "keys": keys}, format="json"
    )
    assert (refused.status_code, refused.json()["code"]) == (400, "invalid")
    assert not PushSubscription.objects.exists()


def test_settings_need_a_user():
    assert APIClient().get("/api/me/").status_code == 401
    assert APIClient().post("/api/me/push-subscriptions/", {}, format="json").status_code == 401


def test_the_service_worker_is_served_from_the_root(client, settings):
    answer = client.get("/sw.js")
    assert answer.status_code == 200
    assert answer["Content-Type"].startswith("text/javascript")
    assert b"showNotification" in answer.content


def test_a_person_may_subscribe_at_most_max_browsers(api, bob_api, settings):
    settings.MAX_PUSH_SUBSCRIPTIONS_PER_USER = 3
    browsers = [PushBrowser(f"{FCM}{n}") for n in range(3)]
    for browser in browsers:
        assert (
            api.post("/api/me/push-subscriptions/", browser.to_json(), format="json").status_code
            == 201
        )
    one_more = api.post(
        "/api/me/push-subscriptions/", PushBrowser(f"{FCM}x").to_json(), format="json"
    )
    assert (one_more.status_code, one_more.json()["code"]) == (429, "too_many_subscriptions")
    assert PushSubscription.objects.count() == 3
    # A browser already subscribed renews its keys; someone else has their own room.
    renewed = api.post("/api/me/push-subscriptions/", browsers[0].to_json(), format="json")
    assert renewed.status_code == 200
    assert (
        bob_api.post(
            "/api/me/push-subscriptions/", PushBrowser(f"{FCM}x").to_json(), format="json"
        ).status_code
        == 201
    )
    # Unsubscribing one makes room again.
    (first, *_) = api.get("/api/me/").json()["push_subscriptions"]
    assert api.delete(f"/api/me/push-subscriptions/{first['id']}/").status_code == 204
    assert (
        api.post(
            "/api/me/push-subscriptions/", PushBrowser(f"{FCM}x").to_json(), format="json"
        ).status_code
        == 201
    )
