"""Talking to a running answer in a real Chromium (docs/design.md §18): the composer stays
usable, Enter queues, Ctrl+Enter steers, a queued message can be cancelled by keyboard."""

import re

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


def interrupt_a_long_answer(page) -> None:
    """Ask for an answer that only a Stop ends, then send "what is 2+3" with Alt+Enter."""
    from playwright.sync_api import expect

    # 300 s: longer than any guard, so an answer that ends at all was stopped.
    page.fill("#prompt", "wait 300 seconds")
    page.keyboard.press("Enter")
    expect(page.locator("details.tool .tool-state").last).to_have_text("running…")
    page.fill("#prompt", "what is 2+3")
    page.keyboard.press("Alt+Enter")


def test_alt_enter_stops_the_answer_and_sends_the_new_message(browser, offline_server):
    from playwright.sync_api import expect

    page = new_page(browser)
    sign_in(page, offline_server)
    interrupt_a_long_answer(page)
    expect(page.locator(".turn-status").first).to_contain_text("Stopped")
    expect(page.locator(".msg.assistant:not(.streaming) .text").last).to_contain_text("2+3 = 5")
    expect(page.locator(".msg.user .text")).to_have_text(["wait 300 seconds", "what is 2+3"])


def test_a_queued_frame_that_arrives_after_its_turn_started_shows_nothing_waiting(
    browser, offline_server
):
    """`queued` and the turns' events leave from different places (docs/design.md §18): the
    page may hear of an interrupt's prompt after its turn has started. The test holds that
    frame back until the turn's agent_start has passed, then lets it through."""
    import json

    from playwright.sync_api import expect

    page = new_page(browser)
    held = {}  # queue_id -> the held `queued` frame
    started = set()  # queue_ids whose agent_start has reached the page
    late = []  # `queued` frames the page got after their turn's agent_start

    def reorder(route):
        server = route.connect_to_server()

        def to_page(message):
            event = json.loads(message) if isinstance(message, str) else {}
            interrupting = event.get("type") == "queued" and event["text"] == "what is 2+3"
            if interrupting and event["queue_id"] not in started:
                held[event["queue_id"]] = message
                return
            route.send(message)
            if interrupting:
                late.append(event["text"])
            if event.get("type") == "agent_start" and event.get("queue_id"):
                started.add(event["queue_id"])
                if event["queue_id"] in held:
                    frame = held.pop(event["queue_id"])
                    route.send(frame)
                    late.append(json.loads(frame)["text"])

        server.on_message(to_page)

    page.route_web_socket(re.compile(r"/ws/sessions/"), reorder)
    sign_in(page, offline_server)
    interrupt_a_long_answer(page)
    expect(page.locator(".msg.assistant:not(.streaming) .text").last).to_contain_text("2+3 = 5")
    assert late == ["what is 2+3"], "the queued frame reached the page after its turn started"
    expect(page.locator("#queue-list li")).to_have_count(0)
    expect(page.locator("#queue")).to_be_hidden()
