"""Sub-agents and the model picker in Chromium: a delegate call links to the sub-agent's
session, the card nests that session under its conversation, and the header picks the model."""

import re

import pytest

from sessions_app.store import get_store
from tests.browser.helpers import ask, browser_test, in_thread, new_page, session_of, sign_in

pytestmark = browser_test


@pytest.mark.parametrize("screen", ["desktop", "phone"])
def test_a_delegate_call_links_to_the_researcher_nested_under_its_conversation(
    browser, offline_server, screen
):
    from playwright.sync_api import expect

    page = new_page(browser, screen)
    sign_in(page, offline_server)
    parent = session_of(page)
    researcher = f"agent_researcher__{parent}"

    ask(page, "ask researcher to compute 6*7")

    call = page.locator("details.tool", has=page.locator(".tool-name", has_text="delegate"))
    expect(call.locator(".tool-state")).to_have_text("done")
    expect(call.locator(".result")).to_contain_text("42")
    expect(page.locator(".msg.assistant[data-seq] .text").last).to_contain_text("42")

    # The card: the researcher's session under the conversation that delegated to it.
    if screen == "phone":
        page.click("#sessions-toggle")
    nested = page.locator(
        f'#session-list > li[data-session-id="{parent}"] > ul.subagents > '
        f'li[data-session-id="{researcher}"]'
    )
    expect(nested).to_be_visible()
    box, card = nested.bounding_box(), page.locator("#sessions").bounding_box()
    assert box["x"] + box["width"] <= card["x"] + card["width"] + 1  # indented, not cut off
    if screen == "phone":
        page.keyboard.press("Escape")

    # The call's link opens the researcher's own, valid history.
    link = page.locator(".msg.assistant", has=call).locator("a.delegate-link")
    expect(link).to_have_attribute("href", f"/?session={researcher}")
    link.click()
    expect(page).to_have_url(re.compile(re.escape(f"session={researcher}")))
    page.locator("#connection[data-state=open]").wait_for()
    expect(page.locator(".msg.user .text").first).to_contain_text("6*7")
    expect(page.locator(".msg.assistant[data-seq] .text").last).to_contain_text("42")
    meta = in_thread(lambda: get_store().get_meta(researcher))
    assert meta.spawned_by == parent and meta.agent == "researcher"


def test_the_model_picker_shows_and_switches_the_sessions_model(browser, offline_server):
    from playwright.sync_api import expect

    page = new_page(browser)
    sign_in(page, offline_server)
    session_id = session_of(page)
    picker = page.locator("#model-select")
    expect(picker).to_have_value("")  # a new session uses its agent's model

    # Any other model is typed in; one the server refuses leaves the model as it was.
    page.select_option("#model-select", "other")
    page.fill("#model-name", "gpt-4")
    page.keyboard.press("Enter")
    expect(page.locator("#notice")).to_contain_text("Model not changed")
    expect(picker).to_have_value("")

    page.select_option("#model-select", "other")
    page.fill("#model-name", "openai:gpt-4o-mini")
    page.keyboard.press("Enter")
    expect(
        page.locator(".system-note", has_text="Model changed to openai:gpt-4o-mini")
    ).to_be_visible()
    expect(picker).to_have_value("openai:gpt-4o-mini")
    assert in_thread(lambda: get_store().get_meta(session_id).model) == "openai:gpt-4o-mini"

    page.select_option("#model-select", "offline")
    expect(page.locator(".system-note", has_text="Model changed to offline")).to_be_visible()
    expect(picker).to_have_value("offline")

    # The header shows the session's model after a reload too.
    page.reload()
    page.locator("#connection[data-state=open]").wait_for()
    expect(picker).to_have_value("offline")
