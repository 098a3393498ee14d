"""The Notifications panel in Chromium: a Discord URL outside the allowlist is refused with the
server's reason and a Discord URL is saved; the page's service worker (/sw.js, scoped to the
whole site) shows a pushed notice as a notification, with the VAPID key the page was given."""

import json

from cryptography.hazmat.primitives.asymmetric import ec

from notices_app.core.vapid import private_key_text, public_key_text
from notices_app.models import NoticeSettings
from tests.browser.helpers import browser_test, in_thread, new_page, sign_in
from tests.helpers import GUARD_SEC, eventually
from tests.multiprocess.servers import daphne

pytestmark = browser_test

DISCORD = "https://discord.com/api/webhooks/123/abc"


def vapid_environment() -> dict:
    key = ec.generate_private_key(ec.SECP256R1())
    return {
        "VAPID_PUBLIC_KEY": public_key_text(key),
        "VAPID_PRIVATE_KEY": private_key_text(key),
        "VAPID_SUBJECT": "mailto:ops@example.com",
    }


def test_the_discord_url_is_saved_and_a_foreign_host_refused(browser, alice):
    from playwright.sync_api import expect

    with daphne() as server:
        page = new_page(browser)
        sign_in(page, server)
        page.locator("#notice-settings summary").click()
        status = page.locator("#notice-settings-status")
        # No VAPID keys on this server: the push box says so instead of failing later.
        expect(page.locator("#push-toggle")).to_be_disabled()
        expect(status).to_contain_text("not set up on this server")

        page.fill("#discord-url", "http://127.0.0.1:6379/")
        page.locator("#discord-form button[type=submit]").click()
        expect(status).to_contain_text("url_not_allowed")
        assert in_thread(lambda: NoticeSettings.objects.filter(owner=alice).exists()) is False

        page.fill("#discord-url", DISCORD)
        page.locator("#discord-form button[type=submit]").click()
        expect(status).to_have_text("Saved.")
        saved = in_thread(lambda: NoticeSettings.objects.get(owner=alice).discord_webhook_url)
        assert saved == DISCORD
        page.reload()
        expect(page.locator("#discord-url")).to_have_value(DISCORD)


def test_the_service_worker_shows_a_pushed_notice(browser, alice):
    environment = vapid_environment()
    with daphne(**environment) as server:
        page = new_page(browser, permissions=["notifications"])
        sign_in(page, server)
        given = page.locator("#notice-settings").get_attribute("data-vapid-public-key")
        assert given == environment["VAPID_PUBLIC_KEY"]

        scope = page.evaluate(
            """async () => {
                const registration = await navigator.serviceWorker.register("/sw.js");
                await navigator.serviceWorker.ready;
                return registration.scope;
            }"""
        )
        assert scope == server + "/"

        # Deliver a push the way a push service would, after the browser decrypted it.
        cdp = page.context.new_cdp_session(page)
        registrations, versions = [], []
        cdp.on(
            "ServiceWorker.workerRegistrationUpdated",
            lambda event: registrations.extend(event["registrations"]),
        )
        cdp.on(
            "ServiceWorker.workerVersionUpdated", lambda event: versions.extend(event["versions"])
        )
        cdp.send("ServiceWorker.enable")
        # Playwright hands over CDP events while it talks to the browser: ask it something.
        eventually(lambda: page.evaluate("0") == 0 and registrations, what="the registration")
        registration_id = registrations[0]["registrationId"]
        # `serviceWorker.ready` resolves while the worker may still be activating; a push sent
        # to it then can be dropped by the browser. Wait until it is activated.
        eventually(
            lambda: (
                page.evaluate("0") == 0
                and any(
                    v["registrationId"] == registration_id and v["status"] == "activated"
                    for v in versions
                )
            ),
            what="the service worker is activated",
        )
        notice = {"session_id": "chat-1", "message_id": "m1", "content": "Reminder: stretch"}

        def shown_after_a_push():
            # A push service delivers again what the browser did not take; the tag keeps a
            # repeated delivery one notification.
            cdp.send(
                "ServiceWorker.deliverPushMessage",
                {
                    "origin": server + "/",
                    "registrationId": registration_id,
                    "data": json.dumps(notice),
                },
            )
            return eventually(
                lambda: page.evaluate(
                    """async () => {
                        const registration = await navigator.serviceWorker.ready;
                        const shown = await registration.getNotifications();
                        return shown.map((n) => [n.title, n.body, n.tag]);
                    }"""
                ),
                what="the service worker showed the notification",
                limit=GUARD_SEC / 4,
                fail=False,
            )

        shown = eventually(shown_after_a_push, what="a pushed notice was shown", interval=0)
        assert shown == [["Jarvis", "Reminder: stretch", "m1"]]
