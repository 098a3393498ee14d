"""Reminders in Chromium, with a real `db_worker` firing them beside Daphne: a reminder typed in
the chat comes back as a 🔔 notice in that conversation; the card lists what is upcoming and
cancels it; a conversation that got a notice while it was not open carries a badge until it
is opened."""

from notices_app.models import Schedule
from notices_app.services import schedules
from sessions_app.store import get_store
from tests.browser.helpers import ask, browser_test, in_thread, new_page, session_of, sign_in
from tests.helpers import eventually
from tests.multiprocess.servers import daphne
from tests.multiprocess.test_schedule_delivery import db_worker

pytestmark = browser_test


def wait_for_notice(session_id: str) -> None:
    """Until the worker process has fired the run and stored its notice: the page is not open
    on that conversation, so the store is the only place to see it."""
    eventually(
        lambda: in_thread(lambda: get_store().get_proactive(session_id)),
        what=f"a notice in {session_id}",
        interval=0.1,
    )


def test_a_reminder_typed_in_the_chat_comes_back_as_a_notice(browser, alice):
    from playwright.sync_api import expect

    with daphne() as server, db_worker():
        page = new_page(browser)
        sign_in(page, server)
        session_id = session_of(page)

        # Upcoming: listed with its text, and cancelled from the list.
        ask(page, "remind me in 10 minutes to drink water")
        later = page.locator(".reminder-item", has_text="drink water")
        expect(later).to_be_visible()
        expect(later.locator(".reminder-when")).to_contain_text("min")
        later.get_by_role("button", name="Cancel reminder: drink water").click()
        expect(later).to_have_count(0)
        expect(page.locator("#reminders-status")).to_have_text("None.")
        assert in_thread(lambda: Schedule.objects.get(text="drink water").state) == "cancelled"

        # Due: the notice arrives in this conversation, live.
        ask(page, "remind me in 2 seconds to stretch")
        notice = page.locator(".msg.proactive")
        expect(notice).to_contain_text("Reminder: stretch")
        expect(notice.locator(".who")).to_contain_text("notice")
        # Fired, so no longer upcoming; and the conversation it is in carries no badge.
        expect(page.locator(".reminder-item", has_text="stretch")).to_have_count(0)
        expect(page.locator(f'li[data-session-id="{session_id}"] .notice-badge')).to_have_count(0)


def test_a_notice_that_arrived_elsewhere_badges_its_session_until_it_is_opened(browser, alice):
    from playwright.sync_api import expect

    with daphne() as server, db_worker():
        page = new_page(browser, "phone")
        sign_in(page, server)
        first = session_of(page)
        ask(page, "what is 2+2?")
        page.click("#sessions-toggle")
        page.click("#new-session")
        page.wait_for_function("id => !location.search.includes(id)", arg=first)
        page.locator("#connection[data-state=open]").wait_for()
        second = session_of(page)
        assert second != first

        # A reminder made in the first conversation fires while the page shows the second.
        in_thread(
            lambda: schedules.schedule_create(
                owner_id=alice.id, text="stretch", in_seconds=0.5, session_id=first
            )
        )
        wait_for_notice(first)
        page.reload()  # or any later refresh of the card: a turn's end, the window's focus
        page.locator("#connection[data-state=open]").wait_for()
        page.click("#sessions-toggle")
        badge = page.locator(f'li[data-session-id="{first}"] .notice-badge')
        expect(badge).to_be_visible()
        expect(badge).to_contain_text("1")
        expect(page.locator(f'li[data-session-id="{second}"] .notice-badge')).to_have_count(0)

        # Opening it shows the notice and clears the badge, also after coming back.
        page.locator(f'li[data-session-id="{first}"] a.session-link').click()
        page.locator("#connection[data-state=open]").wait_for()
        expect(page.locator(".msg.proactive")).to_contain_text("Reminder: stretch")
        page.goto(server + "/?session=" + second)
        page.locator("#connection[data-state=open]").wait_for()
        page.click("#sessions-toggle")
        expect(page.locator(f'li[data-session-id="{first}"] .session-link')).to_be_visible()
        expect(badge).to_have_count(0)
