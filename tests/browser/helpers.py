"""Helpers for the browser tests: screens, signing in, asking, and ORM calls off Playwright's thread."""

import os
import re
import threading
from pathlib import Path

import pytest
from django.db import connections

from tests.builders import password_of
from tests.helpers import GUARD_SEC

CHROMIUM = "/usr/bin/chromium"
LAUNCH_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--no-first-run",
]
# Playwright's waits are guards against hanging, never what a test measures.
TIMEOUT_MS = GUARD_SEC * 1000
USERNAME = "alice"  # the `alice` fixture, who signs in
PASSWORD = password_of(USERNAME)
AXE = Path(__file__).parent / "vendor" / "axe.min.js"

# The two screens every feature is checked on: a laptop and a phone (an iPhone 12-14 size).
SCREENS = {
    "desktop": {"viewport": {"width": 1280, "height": 800}},
    "phone": {"viewport": {"width": 390, "height": 844}, "has_touch": True, "is_mobile": True},
}

browser_test = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(
        not os.path.exists(CHROMIUM),
        reason=f"no Chromium at {CHROMIUM}: install the distribution's chromium package",
    ),
]


def in_thread(function):
    """Run ORM code off this thread: while Playwright's loop is set here, Django would give it a
    connection of its own that nothing closes, and the test database could not be dropped."""
    result = {}

    def run():
        try:
            result["value"] = function()
        finally:
            connections.close_all()

    worker = threading.Thread(target=run)
    worker.start()
    worker.join(GUARD_SEC)
    return result.get("value")


def session_of(page) -> str:
    match = re.search(r"[?&]session=([^&]+)", page.url)
    assert match, page.url
    return match.group(1)


def new_page(browser, screen: str = "desktop", scheme: str = "light", **options):
    context = browser.new_context(**SCREENS[screen], color_scheme=scheme, **options)
    context.set_default_timeout(TIMEOUT_MS)
    return context.new_page()


def sign_in(page, server: str, path: str = "/"):
    """Sign in through the login form and wait until the chat's socket is live."""
    page.goto(server + "/accounts/login/?next=" + path)
    page.fill("#id_username", USERNAME)
    page.fill("#id_password", PASSWORD)
    page.click("button[type=submit]")
    page.locator("#connection[data-state=open]").wait_for()


def ask(page, text: str) -> None:
    """Send a prompt from the composer; return once its answer is stored and the page is idle
    (the Regenerate button appears only then)."""
    answers = page.locator(".msg.assistant[data-seq], .turn-status").count()
    page.fill("#prompt", text)
    page.keyboard.press("Enter")
    page.wait_for_function(
        "n => document.querySelectorAll('.msg.assistant[data-seq], .turn-status').length > n",
        arg=answers,
    )
    page.locator(".regenerate").wait_for()
