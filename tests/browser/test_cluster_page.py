"""The web chat through `make cluster`'s proxy: nginx in front of two Daphne workers. Both
workers are restarted one after the other while the page is open; it reconnects through the
proxy on its own and the conversation carries on."""

import re

from tests.browser.helpers import PASSWORD, USERNAME, browser_test, new_page, session_of
from tests.conftest import requires_postgres
from tests.multiprocess.cluster import cluster, requires_nginx
from tests.multiprocess.redis_layer import requires_redis

pytestmark = [*browser_test, requires_postgres, requires_redis, requires_nginx]


def test_chat_through_the_proxy_survives_a_rolling_restart(alice, browser, tmp_path):
    from playwright.sync_api import expect

    with cluster(tmp_path, workers=2) as running:
        page = new_page(browser)
        page.goto(running.proxy + "/")
        expect(page).to_have_url(re.compile(r"/accounts/login/"))
        page.fill("#id_username", USERNAME)
        page.fill("#id_password", PASSWORD)
        page.click("button[type=submit]")
        expect(page).to_have_url(re.compile(r"\?session="))
        expect(page.locator("#connection")).to_have_text("live")
        session = session_of(page)

        page.fill("#prompt", "what is 17*23?")
        page.keyboard.press("Enter")
        expect(page.locator(".msg.assistant:not(.streaming) .text").last).to_contain_text("391")

        for port in sorted(running.state()["workers"]):
            running.restart_worker(port)
        expect(page.locator("#connection")).to_have_text("live")

        page.fill("#prompt", "what is 2+3?")
        page.keyboard.press("Enter")
        expect(page.locator(".msg.assistant:not(.streaming) .text").last).to_contain_text("5")
        expect(page.locator(".msg.user .text")).to_have_text(["what is 17*23?", "what is 2+3?"])
        assert session_of(page) == session
