"""The person's own words on the page: a notice that quotes a goal shows its `*` and `_` as
typed (the notice is markdown, the goal's text is not), and a goal's long row in the sessions
list stays inside the sidebar on a laptop and on a phone."""

import pytest
from playwright.sync_api import expect

from notices_app.services.goals import goal_create, goal_finish
from sessions_app.services import sessions as session_services
from tests.browser.helpers import browser_test, in_thread, new_page, sign_in

pytestmark = browser_test

# Read as markdown, `*7 is and 2*` and `_the answer_` would be emphasis and lose their marks.
GOAL = "work out what 6*7 is and 2*3, call it _the answer_"
# One word longer than the sidebar is wide: it can only be cut, never wrapped between words.
LONG_WORD_GOAL = "summarize " + "antidisestablishmentarianism" * 3


def conversation_with_goals(owner_id: int) -> str:
    session_services.session_create(owner_id=owner_id, title="Notes " + "x" * 120)
    meta, _ = session_services.session_create(owner_id=owner_id, title="Plans")
    goal = goal_create(owner_id=owner_id, text=GOAL, set_in=meta.id)
    goal_create(owner_id=owner_id, text=LONG_WORD_GOAL, set_in=meta.id)
    goal_finish(session_id=goal.session_id, result="It is **42**.")
    return meta.id


def test_a_goal_s_notice_shows_its_text_as_typed(browser, alice, offline_server):
    session_id = in_thread(lambda: conversation_with_goals(alice.id))
    page = new_page(browser)
    sign_in(page, offline_server, f"/?session={session_id}")

    notice = page.locator(".msg.proactive .markdown")
    expect(notice).to_have_text(f"Goal done — {GOAL}: It is 42.")
    # The goal's words are plain text; the result, the model's own markdown, still renders.
    assert notice.locator("em").count() == 0
    expect(notice.locator("strong")).to_have_text("42")


ROWS_OUTSIDE = """() => {
    const card = document.querySelector('#sessions').getBoundingClientRect();
    return [...document.querySelectorAll('.session-item, .session-name')]
        .filter(node => node.getBoundingClientRect().right > card.right + 0.5)
        .map(node => node.textContent);
}"""


@pytest.mark.parametrize("screen", ["desktop", "phone"])
def test_a_goal_s_long_row_stays_inside_the_sidebar(browser, alice, offline_server, screen):
    session_id = in_thread(lambda: conversation_with_goals(alice.id))
    page = new_page(browser, screen)
    sign_in(page, offline_server, f"/?session={session_id}")
    if screen == "phone":
        page.get_by_role("button", name="Sessions", exact=True).click()
    rows = page.locator(".subagents .session-item")
    expect(rows).to_have_count(2)
    expect(rows.first).to_be_visible()

    assert page.evaluate(ROWS_OUTSIDE) == []
    # Cut, not hidden: the start of each goal's title is still there to read.
    expect(rows.filter(has_text="Goal: work out what 6*7 is")).to_be_visible()
    expect(rows.filter(has_text="Goal: summarize anti")).to_be_visible()
    expect(page.locator(".session-item", has_text="Notes xxx")).to_be_visible()
