"""Goals in Chromium, with a real `db_worker` working on them beside Daphne: a goal set with
`/goal` in the chat appears in the Goals panel, and its result arrives as a 🔔 notice in that
conversation and in the panel; pause, resume and cancel from the panel."""

from notices_app.models import Goal
from notices_app.services.goals import goal_create
from tests.browser.helpers import browser_test, in_thread, new_page, session_of, sign_in
from tests.multiprocess.servers import daphne
from tests.multiprocess.test_schedule_delivery import db_worker

pytestmark = browser_test


def test_a_goal_set_from_the_page_shows_in_the_panel_and_its_result_arrives(browser, alice):
    from playwright.sync_api import expect

    with daphne() as server, db_worker():
        page = new_page(browser)
        sign_in(page, server)
        session_id = session_of(page)
        page.fill("#prompt", "/goal work out what 6*7 is and report it")
        page.keyboard.press("Enter")
        expect(page.locator(".command-result")).to_contain_text("Goal set")

        item = page.locator(".goal-item", has_text="work out what 6*7 is")
        expect(item).to_be_visible()
        # The worker finishes it; the notice comes into this conversation, live.
        notice = page.locator(".msg.proactive")
        expect(notice).to_contain_text("42")
        expect(item.locator(".goal-state")).to_contain_text("done")
        expect(item.locator(".goal-state")).to_contain_text("42")
        goal = in_thread(lambda: Goal.objects.get())
        assert (goal.status, goal.report_to) == ("done", session_id)

        # Its session shows the check-in that did it.
        item.get_by_role("link", name="its session").click()
        page.locator("#connection[data-state=open]").wait_for()
        assert session_of(page) == goal.session_id
        expect(page.locator(".msg.user").first).to_contain_text("Goal: work out what 6*7 is")


def test_pause_resume_and_cancel_from_the_panel(browser, alice):
    from playwright.sync_api import expect

    with daphne() as server:  # no worker: the goal stays where the panel puts it
        page = new_page(browser)
        sign_in(page, server)
        in_thread(lambda: goal_create(owner_id=alice.id, text="find a flat in Lisbon"))
        page.reload()
        item = page.locator(".goal-item", has_text="find a flat in Lisbon")
        expect(item.locator(".goal-state")).to_contain_text("active")

        item.get_by_role("button", name="Pause goal: find a flat in Lisbon").click()
        expect(item.locator(".goal-state")).to_contain_text("paused")
        item.get_by_role("button", name="Resume goal: find a flat in Lisbon").click()
        expect(item.locator(".goal-state")).to_contain_text("active")
        item.get_by_role("button", name="Cancel goal: find a flat in Lisbon").click()
        expect(item.locator(".goal-state")).to_contain_text("cancelled")
        expect(item.get_by_role("button")).to_have_count(0)  # nothing left to change
        assert in_thread(lambda: Goal.objects.get().status) == "cancelled"
