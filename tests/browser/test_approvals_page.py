"""Allow / Deny on a tool call that waits for the person, in a real Chromium: reached with the
keyboard, and still offered after a reload."""

import pytest

from memory_app.services import working_memory_recall, working_memory_remember
from tests.browser.helpers import browser_test, in_thread, new_page, session_of, sign_in
from tests.browser.test_layout_access import axe_audit

pytestmark = browser_test


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_a_waiting_call_is_denied_after_a_reload_and_allowed_by_keyboard(
    browser, offline_server, scheme
):
    from playwright.sync_api import expect

    page = new_page(browser, scheme=scheme)
    sign_in(page, offline_server)
    session_id = session_of(page)
    in_thread(lambda: working_memory_remember(session_id=session_id, key="color", value="blue"))

    # The call waits; a reload still offers the buttons, and Deny leaves the memory alone.
    page.fill("#prompt", "forget my color")
    page.keyboard.press("Enter")
    expect(page.get_by_role("button", name="Deny forget")).to_be_visible()
    page.reload()
    page.locator("#connection[data-state=open]").wait_for()
    tool = page.locator("details.tool").last
    expect(tool.locator(".tool-state")).to_have_text("waiting for your approval")
    assert axe_audit(page) == [], f"a call waiting for approval, {scheme}"
    page.get_by_role("button", name="Deny forget").click()
    expect(tool.locator(".tool-state")).to_have_text("failed")
    expect(tool.locator("pre.result")).to_contain_text("denied")
    expect(page.get_by_role("button", name="Deny forget")).to_have_count(0)
    page.locator(".regenerate").wait_for()
    assert in_thread(lambda: working_memory_recall(session_id=session_id)) == {"color": "blue"}

    # Allow, reached from the call's summary with Tab and pressed with Enter.
    page.fill("#prompt", "forget my color")
    page.keyboard.press("Enter")
    allow = page.get_by_role("button", name="Allow forget")
    expect(allow).to_be_visible()
    tool = page.locator("details.tool").last
    tool.locator("summary").focus()
    page.keyboard.press("Tab")
    expect(allow).to_be_focused()
    page.keyboard.press("Enter")
    expect(tool.locator(".tool-state")).to_have_text("done")
    expect(tool.locator("pre.result")).to_contain_text("forgot color")
    expect(page.locator(".msg.assistant:not(.streaming) .text").last).to_contain_text(
        "I forgot your color."
    )
    assert in_thread(lambda: working_memory_recall(session_id=session_id)) == {}
