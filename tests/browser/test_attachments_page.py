"""Files in the page (docs/design.md §23): paste an image into the composer, see it upload
and its preview, send it, and after a reload see its thumbnail in the conversation — which
opens the file; removed before sending, a file is not sent. axe-core finds nothing serious."""

import base64

import pytest

from tests.browser.helpers import ask, browser_test, new_page, session_of, sign_in
from tests.browser.test_layout_access import axe_audit
from tests.multiprocess.servers import daphne
from tests.sessions_app.files.helpers import png_bytes

pytestmark = browser_test

PASTE = """([name, data]) => {
    const bytes = Uint8Array.from(atob(data), (c) => c.charCodeAt(0));
    const transfer = new DataTransfer();
    transfer.items.add(new File([bytes], name, {type: "image/png"}));
    document.getElementById("prompt").dispatchEvent(
        new ClipboardEvent("paste", {clipboardData: transfer, bubbles: true, cancelable: true}));
}"""


@pytest.fixture
def files_server(alice, tmp_path):
    with daphne(BLOB_STORAGE_URL=f"file://{tmp_path / 'blobs'}") as base:
        yield base


@pytest.mark.parametrize("screen", ["desktop", "phone"])
def test_a_pasted_image_is_sent_and_its_thumbnail_shows_after_a_reload(
    files_server, browser, screen
):
    from playwright.sync_api import expect

    page = new_page(browser, screen)
    sign_in(page, files_server)
    image = base64.b64encode(png_bytes(300, 150)).decode()
    other = base64.b64encode(png_bytes(20, 20, (0, 128, 0))).decode()

    page.evaluate(PASTE, ["screenshot.png", image])
    page.evaluate(PASTE, ["unwanted.png", other])
    chips = page.locator("#attachments .attachment")
    expect(chips).to_have_count(2)
    expect(page.locator("#attachments .attachment.uploading")).to_have_count(0)
    assert axe_audit(page) == [], "the composer with files to send"
    page.get_by_role("button", name="Remove unwanted.png").click()
    expect(chips).to_have_count(1)
    expect(page.get_by_role("button", name="Attach files")).to_be_focused()

    ask(page, "What is in this picture?")
    expect(page.locator("#attachments")).to_be_hidden()

    page.reload()
    page.locator("#connection[data-state=open]").wait_for()
    thumb = page.locator(".msg.user .sent-thumb")
    expect(thumb).to_have_count(1)
    expect(thumb).to_have_attribute("alt", "screenshot.png")
    page.wait_for_function(
        "() => { const i = document.querySelector('.msg.user .sent-thumb');"
        " return i && i.complete && i.naturalWidth > 0; }"
    )
    assert page.evaluate("document.querySelector('.msg.user .sent-thumb').naturalWidth") == 256
    link = page.locator(".msg.user a.sent-attachment")
    href = link.get_attribute("href")
    assert href.startswith(f"/api/sessions/{session_of(page)}/files/")
    opened = page.request.get(files_server + href)
    assert opened.status == 200
    assert opened.body() == base64.b64decode(image)
    assert axe_audit(page) == [], "the conversation with a sent image"
