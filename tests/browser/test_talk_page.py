"""Talking to a running answer in a real Chromium (docs/design.md §18): the composer stays
usable, Enter queues, Ctrl+Enter steers, a queued message can be cancelled by keyboard."""

from memory_app.services import working_memory_remember
from tests.browser.helpers import browser_test, in_thread, new_page, session_of, sign_in
from tests.browser.test_layout_access import axe_audit

pytestmark = browser_test


def test_a_steer_typed_during_a_wait_is_answered_by_the_same_turn(browser, offline_server):
    from playwright.sync_api import expect

    page = new_page(browser)
    sign_in(page, offline_server)
    page.fill("#prompt", "wait 4 seconds")
    page.keyboard.press("Enter")
    tool = page.locator("details.tool").last
    expect(tool.locator(".tool-state")).to_have_text("running…")
    expect(page.get_by_role("button", name="Steer")).to_be_visible()
    page.fill("#prompt", "what is 5+6")
    page.keyboard.press("Control+Enter")
    steered = page.locator(".msg.user.steered")
    expect(steered).to_contain_text("what is 5+6")
    expect(page.locator(".msg.assistant:not(.streaming) .text").last).to_contain_text("11")
    # One turn: the steer joined it rather than starting another.
    expect(page.locator(".msg.user")).to_have_count(2)
    expect(page.locator("#queue")).to_be_hidden()


def test_two_queued_messages_one_cancelled_by_keyboard(browser, offline_server):
    from playwright.sync_api import expect

    page = new_page(browser)
    sign_in(page, offline_server)
    session_id = session_of(page)
    in_thread(lambda: working_memory_remember(session_id=session_id, key="color", value="blue"))
    # The running turn waits for the person's approval: it runs until the test answers.
    page.fill("#prompt", "forget my color")
    page.keyboard.press("Enter")
    allow = page.get_by_role("button", name="Allow forget")
    expect(allow).to_be_visible()
    for text in ("what is 1+1", "what is 2+2"):
        page.fill("#prompt", text)
        page.keyboard.press("Enter")
    items = page.locator("#queue-list li")
    expect(items).to_have_count(2)
    expect(page.locator("#announcer")).to_have_text("Queued: what is 2+2")
    assert axe_audit(page) == [], "two messages waiting"
    page.get_by_role("button", name="Cancel: what is 1+1").focus()
    page.keyboard.press("Enter")
    expect(items).to_have_count(1)
    expect(items.first).to_contain_text("what is 2+2")
    allow.click()
    expect(page.locator(".msg.assistant:not(.streaming) .text").last).to_contain_text("4")
    expect(page.locator("#queue")).to_be_hidden()
    expect(page.locator(".msg.user .text")).to_have_text(["forget my color", "what is 2+2"])


def test_alt_enter_stops_the_answer_and_sends_the_new_message(browser, offline_server):
    from playwright.sync_api import expect

    page = new_page(browser)
    sign_in(page, offline_server)
    # 300 s: longer than any guard, so an answer that ends at all was stopped.
    page.fill("#prompt", "wait 300 seconds")
    page.keyboard.press("Enter")
    expect(page.locator("details.tool .tool-state").last).to_have_text("running…")
    page.fill("#prompt", "what is 2+3")
    page.keyboard.press("Alt+Enter")
    expect(page.locator(".turn-status").first).to_contain_text("Stopped")
    expect(page.locator(".msg.assistant:not(.streaming) .text").last).to_contain_text("2+3 = 5")
    expect(page.locator(".msg.user .text")).to_have_text(["wait 300 seconds", "what is 2+3"])
