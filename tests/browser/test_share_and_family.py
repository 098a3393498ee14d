"""Share links, the live list and the family tree in Chromium (docs/design.md §24): a share
link opens in a fresh browser without an account; a rename and a pin in one tab show in a
second tab without a reload; a three-level branch tree is walked by keyboard; and axe-core
finds no serious or critical violation on the shared page nor the tree. A shared message's
image shows as its thumbnail, read through the share by a browser without an account."""

import re

import httpx
import pytest

from tests.browser.helpers import browser_test, in_thread, new_page, sign_in
from tests.browser.test_layout_access import axe_audit
from tests.builders import token_of, turn_entries
from tests.multiprocess.servers import daphne
from tests.sessions_app.files.helpers import png_bytes

pytestmark = browser_test

ANSWER = "Start at **Belém**, then ride the *tram 28*."


def conversation(owner, session_id="trip", title="Trip to Lisbon"):
    from sessions_app.store import get_store

    store = get_store()
    store.create(session_id, owner_id=owner.id, title=title)
    store.append(session_id, turn_entries("Plan a day in Lisbon", ANSWER))
    return session_id


def share_token(owner, session_id):
    from sessions_app.services.shares import share_create

    _, token = share_create(
        session_id=session_id, owner_id=owner.id, expires_in_days=None, include_tools=False
    )
    return token


def test_a_share_link_opens_without_an_account(browser, offline_server, alice):
    from playwright.sync_api import expect

    token = in_thread(lambda: share_token(alice, conversation(alice)))
    page = new_page(browser)  # a fresh context: no cookie, nobody signed in
    page.goto(f"{offline_server}/s/{token}")
    expect(page.locator("#shared-title")).to_have_text("Trip to Lisbon")
    expect(page.locator(".msg.user .text")).to_have_text("Plan a day in Lisbon")
    # The chat's markdown rendering: emphasis is markup, not asterisks.
    answer = page.locator(".msg.assistant .markdown")
    expect(answer.locator("strong")).to_have_text("Belém")
    expect(answer.locator("em")).to_have_text("tram 28")
    assert page.locator("#composer, #session-list, #shared-copy").count() == 0
    robots = page.locator('meta[name="robots"]').get_attribute("content")
    assert "noindex" in robots
    assert axe_audit(page) == []

    page.goto(f"{offline_server}/s/{'x' * 43}")
    assert page.locator(".msg").count() == 0


@pytest.fixture
def files_server(alice, tmp_path):
    with daphne(BLOB_STORAGE_URL=f"file://{tmp_path / 'blobs'}") as base:
        yield base


def shared_beach_photo(base, owner):
    """A prompt with an image and a text file, shared; the share's url."""
    headers = {"Authorization": f"Token {in_thread(lambda: token_of(owner))}"}
    with httpx.Client(base_url=base, headers=headers, timeout=60) as http:
        assert http.post("/api/sessions/", json={"id": "beach"}).status_code == 201
        ids = [
            http.post("/api/sessions/beach/files/", files={"file": (name, content, mime)}).json()[
                "id"
            ]
            for name, content, mime in (
                ("beach.png", png_bytes(600, 300), "image/png"),
                ("packing.txt", b"Passport, charger, sunscreen\n", "text/plain"),
            )
        ]
        sent = http.post(
            "/api/sessions/beach/messages/", json={"text": "Where is this?", "attachments": ids}
        )
        assert sent.status_code == 200, sent.text
        return http.post("/api/sessions/beach/shares/", json={}).json()["url"]


def test_a_shared_image_shows_as_its_thumbnail_without_an_account(files_server, browser, alice):
    from playwright.sync_api import expect

    url = shared_beach_photo(files_server, alice)
    page = new_page(browser)  # nobody signed in
    page.goto(files_server + url)
    expect(page.locator(".msg.user .text")).to_have_text("Where is this?")
    thumb = page.locator(".msg.user .sent-thumb")
    expect(thumb).to_have_attribute("alt", "beach.png")
    page.wait_for_function(
        "() => { const i = document.querySelector('.msg.user .sent-thumb');"
        " return i && i.complete && i.naturalWidth > 0; }"
    )
    assert page.evaluate("document.querySelector('.msg.user .sent-thumb').naturalWidth") == 256
    chip = page.locator(".msg.user a.sent-attachment", has_text="packing.txt")
    expect(chip).to_be_visible()
    token = url.removeprefix("/s/")
    for link in (page.locator(".msg.user a.sent-attachment:has(img)"), chip):
        href = link.get_attribute("href")
        assert href.startswith(f"/api/shared/{token}/files/")
        assert page.request.get(files_server + href).status == 200
    assert axe_audit(page) == []


def test_rename_and_pin_in_one_tab_show_in_another_without_reload(browser, offline_server, alice):
    from playwright.sync_api import expect

    in_thread(lambda: conversation(alice, "older", "Older talk"))
    in_thread(lambda: conversation(alice, "newer", "Newer talk"))
    first = new_page(browser)
    sign_in(first, offline_server, "/?session=newer")
    second = first.context.new_page()
    second.goto(f"{offline_server}/?session=newer")
    second.locator("#connection[data-state=open]").wait_for()
    second.locator("body[data-live-list=open]").wait_for()
    rows = second.locator("#session-list > .session-item")
    expect(rows.locator(".session-name")).to_have_text(["Newer talk", "Older talk"])

    row = first.locator('.session-item[data-session-id="older"]')
    row.locator(".rename").click()
    first.keyboard.press("Control+A")
    first.keyboard.type("Lisbon plans")
    first.keyboard.press("Enter")
    expect(row.locator(".session-name")).to_have_text("Lisbon plans")
    row.locator(".pin-session").click()

    # The second tab, never reloaded: the renamed session is pinned to the top.
    expect(rows.locator(".session-name")).to_have_text(["Pinned: Lisbon plans", "Newer talk"])
    expect(second.locator('.session-item[data-session-id="older"] .pin-session')).to_have_attribute(
        "aria-pressed", "true"
    )


def family(owner):
    from sessions_app.services.sessions import session_branch

    conversation(owner, "root", "Root talk")
    child = session_branch(session_id="root", owner_id=owner.id, new_id="child").id
    grandchild = session_branch(session_id=child, owner_id=owner.id, new_id="grandchild").id
    session_branch(session_id="root", owner_id=owner.id, new_id="sibling")
    return grandchild


def test_a_three_level_tree_is_walked_by_keyboard(browser, offline_server, alice):
    from playwright.sync_api import expect

    in_thread(lambda: family(alice))
    page = new_page(browser)
    sign_in(page, offline_server, "/?session=grandchild")
    page.click("#tree-open")
    tree = page.locator("#family-tree")
    focused = page.locator("#family-tree [role=treeitem]:focus")
    expect(focused).to_have_attribute("data-session-id", "grandchild")
    expect(focused).to_have_attribute("aria-level", "3")
    assert axe_audit(page) == []

    page.keyboard.press("ArrowLeft")  # to its parent
    expect(focused).to_have_attribute("data-session-id", "child")
    page.keyboard.press("ArrowLeft")  # collapses the child
    expect(tree.locator('[data-session-id="child"]')).to_have_attribute("aria-expanded", "false")
    expect(tree.locator('[data-session-id="grandchild"]')).to_be_hidden()
    page.keyboard.press("ArrowDown")  # past the collapsed branch, to the sibling
    expect(focused).to_have_attribute("data-session-id", "sibling")
    page.keyboard.press("Home")
    expect(focused).to_have_attribute("data-session-id", "root")
    page.keyboard.press("ArrowRight")  # into its first branch
    expect(focused).to_have_attribute("data-session-id", "child")
    page.keyboard.press("ArrowRight")  # opens it again
    page.keyboard.press("ArrowRight")
    expect(focused).to_have_attribute("data-session-id", "grandchild")
    page.keyboard.press("ArrowUp")
    page.keyboard.press("ArrowUp")
    expect(focused).to_have_attribute("data-session-id", "root")
    page.keyboard.press("Enter")
    expect(page).to_have_url(re.compile(r"session=root"))
    page.locator("#connection[data-state=open]").wait_for()
    expect(page.locator("#tree-dialog")).not_to_be_visible()
