"""A reload mid-answer continues the answer (docs/design.md §17): the page shows the answer from
where it is, keeps growing with no gap or repeat, shows that the turn runs, and its Stop
button aborts it — on one worker, and across two (PostgreSQL + Redis): a reload that lands on
the other worker and a tab opened there both follow the answer, and Stop from there ends it."""

import pytest
from playwright.sync_api import expect

from tests.browser.helpers import browser_test, in_thread, new_page, session_of, sign_in
from tests.conftest import requires_postgres
from tests.fakes.llm_server import Hold, Reply
from tests.helpers import GUARD_SEC
from tests.multiprocess.redis_layer import TEST_REDIS_URL, requires_redis
from tests.multiprocess.servers import daphne

pytestmark = browser_test

WORDS = [f"w{n:03d}" for n in range(60)]
ANSWER = " ".join(WORDS)
STREAMING = ".msg.assistant.streaming .text"


def start_held_answer(page, model) -> Hold:
    """Ask; return once the answer's first half is on the page and the model is held there."""
    hold = Hold(words=30)
    # After its text the model keeps talking until stopped: only Stop ends this turn.
    model.script(Reply(text=ANSWER, hold=hold, until_stopped=True))
    page.fill("#prompt", "count to sixty")
    page.keyboard.press("Enter")
    expect(page.locator(STREAMING)).to_contain_text("w000")
    assert hold.reached.wait(GUARD_SEC)
    return hold


def continues_and_stops(page, hold: Hold) -> None:
    """The page shows the running answer from its first word and Stop; released, the answer
    grows from the same text; Stop ends it as stopped."""
    expect(page.locator(STREAMING)).to_contain_text("w000 w001")
    expect(page.locator("#abort")).to_be_visible()
    hold.release()
    expect(page.locator(STREAMING)).to_contain_text("w059 more")
    shown = page.locator(STREAMING).inner_text()
    assert shown.startswith(ANSWER), shown  # no gap, no word twice
    page.click("#abort")
    expect(page.locator(".turn-status")).to_contain_text("Stopped")
    expect(page.locator("#send")).to_be_visible()
    stored = page.locator(".msg.assistant[data-seq] .text").last.inner_text()
    assert stored.startswith(ANSWER), stored


def stored_statuses(session_id):
    from sessions_app.store import get_store

    return in_thread(
        lambda: [
            e.data["status"] for e in get_store().get_messages(session_id) if e.kind == "turn_end"
        ]
    )


def test_a_reload_mid_answer_continues_it_and_stop_works(browser, model, model_server):
    page = new_page(browser)
    sign_in(page, model_server)
    hold = start_held_answer(page, model)
    page.reload()
    page.locator("#connection[data-state=open]").wait_for()
    continues_and_stops(page, hold)
    assert stored_statuses(session_of(page)) == ["aborted"]


@requires_postgres
@requires_redis
@pytest.mark.postgres
def test_a_tab_on_the_other_worker_continues_the_answer_and_stops_it(browser, model, alice):
    env = {
        "REDIS_URL": TEST_REDIS_URL,
        "JARVIS_MODEL": "openai:gpt-4o-mini",
        "OPENAI_BASE_URL": model.openai_url,
        "OPENAI_API_KEY": "test",
    }
    with daphne(**env) as worker_a, daphne(**env) as worker_b:
        first = new_page(browser)
        sign_in(first, worker_a)
        hold = start_held_answer(first, model)
        session_id = session_of(first)
        # The first tab reloads and, as behind a proxy, lands on the other worker: it shows
        # the answer from its first word while the turn runs on worker A.
        first.goto(f"{worker_b}/?session={session_id}")
        first.locator("#connection[data-state=open]").wait_for()
        expect(first.locator(STREAMING)).to_contain_text("w000 w001")
        expect(first.locator("#abort")).to_be_visible()
        other = new_page(browser)
        sign_in(other, worker_b, f"/?session={session_id}")
        continues_and_stops(other, hold)
        expect(first.locator(".turn-status")).to_contain_text("Stopped")
        expect(first.locator("#send")).to_be_visible()
        reloaded = first.locator(".msg.assistant[data-seq] .text").last.inner_text()
        assert reloaded.startswith(ANSWER), reloaded
    assert stored_statuses(session_id) == ["aborted"]
