"""The Procedures panel (docs/design.md §29), as a person uses it: the drafts Jarvis made are
listed with Approve and Reject, reached and pressed from the keyboard, said to a screen
reader by name and in a status line; axe-core finds nothing serious, in both themes."""

import pytest
from playwright.sync_api import expect

from memory_app.models import Procedure
from tests.browser.helpers import browser_test, in_thread, new_page, sign_in
from tests.browser.test_layout_access import axe_audit

pytestmark = browser_test

ARITHMETIC = "How to handle arithmetic requests"
TIME = "How to handle time requests"


def drafts(owner) -> None:
    for kind, tool in (("arithmetic", "calculator"), ("time", "clock")):
        Procedure.objects.create(
            owner=owner,
            task_kind=kind,
            title=f"How to handle {kind} requests",
            steps=[{"tool": tool, "text": f"Call the `{tool}` tool."}],
        )


def status_of(title: str) -> str:
    return Procedure.objects.get(title=title).status


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_drafts_are_approved_and_rejected_from_the_keyboard(browser, alice, offline_server, scheme):
    in_thread(lambda: drafts(alice))
    page = new_page(browser, scheme=scheme)
    sign_in(page, offline_server)
    panel = page.get_by_role("region", name="Procedures")
    items = panel.locator(".procedure-item")
    expect(items).to_have_count(2)
    arithmetic = items.filter(has_text=ARITHMETIC)
    expect(arithmetic).to_contain_text("draft · waiting for you")
    expect(arithmetic).to_contain_text("Call the `calculator` tool.")
    assert axe_audit(page) == [], f"drafts waiting, {scheme}"

    # Approve, by keyboard: from the panel's first button (the newest draft's Approve), Tab
    # past its Reject to the next draft's Approve, then Enter.
    panel.get_by_role("button").first.focus()
    page.keyboard.press("Tab")
    page.keyboard.press("Tab")
    expect(panel.get_by_role("button", name=f"Approve procedure: {ARITHMETIC}")).to_be_focused()
    page.keyboard.press("Enter")
    expect(arithmetic).to_contain_text("approved · in use")
    expect(page.locator("#procedures-status")).to_have_text(f"Approved: {ARITHMETIC}")
    assert in_thread(lambda: status_of(ARITHMETIC)) == "approved"

    reject = panel.get_by_role("button", name=f"Reject procedure: {TIME}")
    reject.focus()
    page.keyboard.press("Space")
    expect(items).to_have_count(1)  # a rejected procedure leaves the list
    expect(page.locator("#procedures-status")).to_have_text(f"Rejected: {TIME}")
    assert in_thread(lambda: status_of(TIME)) == "rejected"
    # Focus stays in the panel, on what is left to press.
    expect(panel.get_by_role("button", name=f"Stop using procedure: {ARITHMETIC}")).to_be_focused()
    assert axe_audit(page) == [], f"one approved, {scheme}"

    page.reload()
    expect(panel.locator(".procedure-item")).to_have_count(1)
    expect(panel.locator(".procedure-item")).to_contain_text("approved · in use")
