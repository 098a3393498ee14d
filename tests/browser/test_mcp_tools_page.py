"""A tool of an MCP server in the page, in a real Chromium (docs/design.md §31): the call is
shown with its server's name, the approval names the server, the tool and the arguments, and
once allowed the result is shown; an image a tool returns is shown in the conversation."""

from tests.browser.helpers import browser_test, new_page, sign_in
from tests.browser.test_layout_access import axe_audit

pytestmark = browser_test


def test_an_mcp_call_is_asked_about_allowed_and_its_result_shown(browser, mcp_offline_server):
    from playwright.sync_api import expect

    page = new_page(browser)
    sign_in(page, mcp_offline_server)
    page.fill("#prompt", 'call mcp__fake__write_note {"text": "buy milk"}')
    page.keyboard.press("Enter")

    tool = page.locator("details.tool").last
    expect(tool.locator(".tool-name")).to_have_text("write_note")
    expect(tool.locator(".tool-server")).to_have_text("MCP · fake")
    approval = page.get_by_role("group", name="Approval for write_note (MCP server fake)")
    expect(approval).to_contain_text("Allow write_note (MCP server fake) to run?")
    expect(approval.locator(".approval-arguments")).to_have_text('{"text":"buy milk"}')
    assert axe_audit(page) == [], "an MCP call waiting for approval"

    page.get_by_role("button", name="Allow write_note (MCP server fake)").click()
    expect(tool.locator(".tool-state")).to_have_text("done")
    expect(tool.locator("pre.result")).to_have_text("noted: buy milk")
    page.locator(".regenerate").wait_for()

    # A trusted tool's image: shown under the call, like a file of the conversation.
    page.fill("#prompt", "call mcp__fake__red_square {}")
    page.keyboard.press("Enter")
    image = page.get_by_role("img", name="fake-red_square-1.png")
    expect(image).to_be_visible()
    # The thumbnail's bytes came (from the blob store, through the files API).
    page.wait_for_function(
        "(img) => img.complete && img.naturalWidth > 0", arg=image.element_handle()
    )
    assert axe_audit(page) == [], "an MCP call's result and image"
