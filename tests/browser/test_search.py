"""Search from the sessions card in Chromium: a word typed in one conversation is found from
another, the excerpt shows the match highlighted and the message's own text as text, and the
hit opens its conversation at that entry."""

import re

import pytest

from tests.browser.helpers import ask, browser_test, new_page, session_of, sign_in

pytestmark = browser_test

SAID = "the spare key is under the <b>marmalade</b> jar & the blue pot"


@pytest.mark.parametrize("screen", ["desktop", "phone"])
def test_a_word_said_in_one_session_is_found_from_another_and_opens_there(
    browser, offline_server, screen
):
    from playwright.sync_api import expect

    page = new_page(browser, screen)
    sign_in(page, offline_server)
    first = session_of(page)
    ask(page, SAID)
    said_seq = page.locator(".msg.user[data-seq]").first.get_attribute("data-seq")
    for number in range(6):  # enough later turns that the message is scrolled out of view
        ask(page, f"what is {number}+1?")
    said = page.locator(f'.msg.user[data-seq="{said_seq}"]')
    expect(said).not_to_be_in_viewport()

    # Another conversation.
    if screen == "phone":
        page.click("#sessions-toggle")
    page.click("#new-session")
    page.wait_for_function("id => !location.search.includes(id)", arg=first)
    page.locator("#connection[data-state=open]").wait_for()
    if screen == "phone":
        page.click("#sessions-toggle")

    page.fill("#search-query", "marmalade")
    hit = page.locator(f'.search-link[href="/?session={first}&seq={said_seq}"]')
    expect(hit).to_be_visible()
    snippet = hit.locator(".search-snippet")
    expect(snippet.locator("mark")).to_have_text(["marmalade"])
    # The message's own markup is shown as the text it was, never made into elements.
    expect(snippet).to_contain_text("<b>")
    expect(snippet).to_contain_text("& the blue pot")
    assert page.locator("#search-results b").count() == 0

    hit.click()
    expect(page).to_have_url(re.compile(re.escape(f"session={first}&seq={said_seq}")))
    page.locator("#connection[data-state=open]").wait_for()
    expect(said).to_be_in_viewport()
    expect(said).to_be_focused()
    expect(said.locator(".text")).to_have_text(SAID)


def test_a_search_that_finds_nothing_says_so(browser, offline_server):
    from playwright.sync_api import expect

    page = new_page(browser)
    sign_in(page, offline_server)
    page.fill("#search-query", "xylophone")
    expect(page.locator("#search-status")).to_have_text("Nothing found.")
    page.keyboard.press("Escape")
    expect(page.locator("#search-results")).to_be_hidden()
