"""Export before you delete (docs/design.md §31), as a person does it on the page: `/export`,
then Delete; the page says where the export is, and its link still downloads it."""

from pathlib import Path

import pytest
from playwright.sync_api import expect

from sessions_app.services import sessions as session_services
from sessions_app.store import get_store
from tests.browser.helpers import browser_test, in_thread, new_page, sign_in
from tests.builders import turn_entries

pytestmark = browser_test


def a_conversation(owner_id: int, session_id: str) -> None:
    session_services.session_create(owner_id=owner_id, session_id=session_id, title="Locker")
    get_store().append(session_id, turn_entries("my locker code is 4411", "Noted: 4411."))


@pytest.mark.parametrize("which", ["open", "listed"])
def test_an_export_made_before_a_delete_still_downloads(browser, alice, offline_server, which):
    in_thread(lambda: a_conversation(alice.id, "locker"))
    in_thread(lambda: session_services.session_create(owner_id=alice.id, session_id="other"))
    page = new_page(browser)
    page.on("dialog", lambda dialog: dialog.accept())
    sign_in(page, offline_server, "/?session=locker")
    page.fill("#prompt", "/export md")
    page.keyboard.press("Enter")
    expect(page.locator(".command-result")).to_contain_text("exported locker.md")

    if which == "open":  # the page reloads onto another conversation
        page.click("#delete")
    else:  # deleted from the list while another conversation is open
        page.goto(offline_server + "/?session=other")
        row = page.locator('.session-item[data-session-id="locker"]')
        row.hover()
        row.locator("button.delete-session").click()
    expect(page.locator('.session-item[data-session-id="locker"]')).to_have_count(0)

    notice = page.locator("#notice")
    expect(notice).to_contain_text("Deleted locker. Its export stays yours until")
    link = notice.get_by_role("link", name="locker.md")
    with page.expect_download() as download:
        link.click()
    assert download.value.suggested_filename == "locker.md"
    assert "my locker code is 4411" in Path(download.value.path()).read_text()
