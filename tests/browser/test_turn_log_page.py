"""The turn's log in Chromium (docs/design.md §20): a finished tool says how long it ran."""

import re

from tests.browser.helpers import ask, browser_test, new_page, sign_in

pytestmark = browser_test


def test_a_finished_tool_shows_how_long_it_ran(browser, offline_server):
    from playwright.sync_api import expect

    page = new_page(browser)
    sign_in(page, offline_server)
    ask(page, "what is 17*23?")
    tool = page.locator("details.tool", has=page.locator(".tool-name", has_text="calculator"))
    expect(tool.locator("summary")).to_contain_text(re.compile(r"done · \d+(\.\d)? (ms|s)"))

    # A reloaded page shows it from the stored entry.
    page.reload()
    page.locator("#connection[data-state=open]").wait_for()
    expect(tool.locator("summary")).to_contain_text(re.compile(r"done · \d+(\.\d)? (ms|s)"))
