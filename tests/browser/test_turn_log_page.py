"""The turn's log in Chromium (docs/design.md §20): a finished tool says how long it ran, and
the model picker shows and sets the session's thinking level."""

import re

from sessions_app.store import get_store
from tests.browser.helpers import ask, browser_test, in_thread, new_page, session_of, sign_in

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


def test_the_model_picker_shows_and_sets_thinking(browser, offline_server):
    from playwright.sync_api import expect

    page = new_page(browser)
    sign_in(page, offline_server)
    session_id = session_of(page)
    thinking = page.locator("#thinking-select")
    expect(thinking).to_have_value("off")

    page.select_option("#thinking-select", "high")
    expect(page.locator(".system-note", has_text="Thinking set to high")).to_be_visible()
    expect(thinking).to_have_value("high")
    assert in_thread(lambda: get_store().get_meta(session_id).thinking) == "high"

    # After a reload the header still shows it.
    page.reload()
    page.locator("#connection[data-state=open]").wait_for()
    expect(thinking).to_have_value("high")
