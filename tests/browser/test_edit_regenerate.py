"""Edit and resend, and Regenerate: both branch the conversation and leave the original as it was."""

import pytest
from playwright.sync_api import expect

from sessions_app.store import get_store
from tests.browser.helpers import ask, browser_test, in_thread, new_page, session_of, sign_in

pytestmark = browser_test


def user_texts(session_id: str) -> list[str]:
    entries = in_thread(lambda: get_store().get_messages(session_id))
    return [entry.content for entry in entries if entry.kind == "message" and entry.role == "user"]


def turn_outline(session_id: str) -> list[tuple[str, str]]:
    """(kind, turn status or role) per entry: whole turns read start, user, …, end completed."""
    entries = in_thread(lambda: get_store().get_messages(session_id))
    return [
        (entry.kind, entry.data["status"] if entry.kind == "turn_end" else entry.role)
        for entry in entries
    ]


def meta(session_id: str):
    return in_thread(lambda: get_store().get_meta(session_id))


# What an edit or a regenerate puts between the kept turns and the new one (§20).
BRANCH_SUMMARY = [("branch_summary", "")]

# A request the offline model answers with one tool call: start, ask, call, result, answer, end.
TOOL_TURN = [
    ("turn_start", ""),
    ("message", "user"),
    ("message", "assistant"),
    ("message", "tool"),
    ("message", "assistant"),
    ("turn_end", "completed"),
]


def edit_button(page, index: int):
    bubble = page.locator(".msg.user").nth(index)
    bubble.hover()  # on a desktop, the button shows on hover (or keyboard focus)
    return bubble.get_by_role("button", name="Edit message")


@pytest.mark.parametrize("screen", ["desktop", "phone"])
def test_edit_branches_before_the_message_and_sends_the_new_text(browser, offline_server, screen):
    page = new_page(browser, screen)
    sign_in(page, offline_server)
    original = session_of(page)
    ask(page, "what is 2+3?")
    ask(page, "what is 4*4?")
    before = meta(original).last_seq

    # Edit the second message: the branch keeps the first turn whole, then asks the new text.
    edit_button(page, 1).click()
    box = page.get_by_role("textbox", name="Edited message")
    expect(box).to_have_value("what is 4*4?")
    box.fill("what is 6*7?")
    box.press("Enter")
    expect(page).not_to_have_url(f"{offline_server}/?session={original}")
    page.locator(".regenerate").wait_for()
    branch = session_of(page)
    expect(page.locator(".msg.user .text")).to_have_text(["what is 2+3?", "what is 6*7?"])
    expect(page.locator(".msg.assistant[data-seq] .markdown").last).to_contain_text("42")
    assert user_texts(branch) == ["what is 2+3?", "what is 6*7?"]
    assert turn_outline(branch) == TOOL_TURN + BRANCH_SUMMARY + TOOL_TURN
    assert meta(branch).parent_id == original
    # What the abandoned path did is shown right above the new one.
    left_behind = page.locator("details.branch-summary")
    expect(left_behind).to_contain_text(f"Branched from {original} at #6")
    expect(left_behind.locator("pre")).to_contain_text("Asked: what is 4*4?")
    expect(left_behind.locator("pre")).to_contain_text("Answered:")
    expect(page.locator("details.branch-summary + .msg.user .text")).to_have_text("what is 6*7?")
    # The original conversation is exactly as it was.
    assert user_texts(original) == ["what is 2+3?", "what is 4*4?"]
    assert meta(original).last_seq == before
    expect(page.locator(f'.session-item[data-session-id="{branch}"] .parent')).to_contain_text(
        original
    )

    # Editing the first message with the keyboard alone: the new branch starts empty.
    edit_button(page, 0).focus()
    page.keyboard.press("Enter")
    box = page.get_by_role("textbox", name="Edited message")
    expect(box).to_be_focused()
    page.keyboard.press("Escape")  # cancel gives the message back, focus on its Edit button
    expect(box).to_have_count(0)
    expect(
        page.locator(".msg.user").nth(0).get_by_role("button", name="Edit message")
    ).to_be_focused()
    page.keyboard.press("Enter")
    page.keyboard.press("ControlOrMeta+a")
    page.keyboard.type("what is 1+1?")
    page.keyboard.press("Enter")
    expect(page).not_to_have_url(f"{offline_server}/?session={branch}")
    page.locator(".regenerate").wait_for()
    second = session_of(page)
    expect(page.locator(".msg.user .text")).to_have_text(["what is 1+1?"])
    assert user_texts(second) == ["what is 1+1?"]
    assert turn_outline(second)[:1] == BRANCH_SUMMARY
    assert meta(second).branched_at_seq == 0
    assert user_texts(branch) == ["what is 2+3?", "what is 6*7?"]


@pytest.mark.parametrize("screen", ["desktop", "phone"])
def test_regenerate_resends_the_last_request_in_a_branch(browser, offline_server, screen):
    page = new_page(browser, screen)
    sign_in(page, offline_server)
    original = session_of(page)
    ask(page, "what is 2+3?")
    ask(page, "remember that my color is blue")
    before = in_thread(lambda: get_store().get_messages(original))

    # Only the last answer offers it.
    regenerate = page.get_by_role("button", name="Regenerate answer")
    expect(regenerate).to_have_count(1)
    expect(page.locator(".msg.assistant[data-seq]").last.locator(".regenerate")).to_have_count(1)
    regenerate.click()
    expect(page).not_to_have_url(f"{offline_server}/?session={original}")
    page.locator(".regenerate").wait_for()
    branch = session_of(page)
    expect(page.locator(".msg.user .text")).to_have_text(
        ["what is 2+3?", "remember that my color is blue"]
    )
    expect(page.locator(".msg.assistant[data-seq] .markdown").last).to_contain_text(
        "your color is blue"
    )
    assert user_texts(branch) == ["what is 2+3?", "remember that my color is blue"]
    assert turn_outline(branch) == TOOL_TURN + BRANCH_SUMMARY + TOOL_TURN
    expect(page.locator("details.branch-summary pre")).to_contain_text(
        "Asked: remember that my color is blue"
    )
    # Never an in-place rewrite: the original keeps every entry it had.
    after = in_thread(lambda: get_store().get_messages(original))
    assert [(e.seq, e.kind, e.content) for e in after] == [
        (e.seq, e.kind, e.content) for e in before
    ]

    # While an answer is under way there is nothing to regenerate; a stopped turn offers it.
    page.fill("#prompt", "wait 60 seconds")
    page.keyboard.press("Enter")
    stop = page.get_by_role("button", name="Stop answering")
    expect(stop).to_be_visible()
    expect(page.locator(".regenerate")).to_have_count(0)
    expect(page.locator("details.tool").last.locator(".tool-name")).to_have_text("wait")
    expect(page.locator("details.tool").last.locator(".tool-state")).to_have_text("running…")
    stop.click()
    status = page.locator(".turn-status")
    expect(status).to_contain_text("Stopped")
    expect(status.get_by_role("button", name="Regenerate answer")).to_be_visible()
    expect(page.get_by_role("button", name="Send")).to_be_visible()
