"""A conversation of any length opens in Chromium (docs/design.md §8): the page shows its latest
entries from the first frame, loads older ones as the reader scrolls up, and a search hit
older than what is shown opens at that entry. Its socket never closes with 1011."""

import json
import time

import pytest

from sessions_app.store import get_store
from tests.browser.helpers import browser_test, in_thread, new_page, sign_in
from tests.builders import assistant, call, result, user
from tests.multiprocess.servers import daphne

pytestmark = browser_test

FIRST = "the very first message"
WORDS = "a line of ordinary words that a conversation holds, " * 175  # 9 KB
LATEST = "the latest message"

# Every close code the page's sockets see, kept where the test can read it.
RECORD_CLOSES = """
window.closeCodes = [];
const PageSocket = window.WebSocket;
window.WebSocket = class extends PageSocket {
  constructor(...args) {
    super(...args);
    this.addEventListener("close", (event) => window.closeCodes.push(event.code));
  }
};
"""


def _build_long_session(session_id: str, owner_id: int) -> int:
    """About 20 MB: a first message, 2,000 entries of 9 KB, twelve 100 KB messages, a prompt
    of 100,000 emoji and a short latest answer; returns the bytes of its entries' text."""
    store = get_store()
    store.create(session_id, owner_id=owner_id)
    entries = [user(FIRST)]
    entries += [
        user(f"short {n} " + WORDS) if n % 2 else assistant(f"reply {n} " + WORDS)
        for n in range(2000)
    ]
    entries += [
        user(f"big {n} " + WORDS * 11) if n % 2 else assistant(f"big {n} " + WORDS * 11)
        for n in range(12)
    ]
    entries += [user("😀" * 100_000), assistant(LATEST)]
    store.append(session_id, entries)
    return sum(len(entry.content.encode()) for entry in entries)


def test_a_long_conversation_opens_at_its_latest_message_and_scrolls_back_to_the_first(
    browser, offline_server, alice
):
    from playwright.sync_api import expect

    size = in_thread(lambda: _build_long_session("long", alice.id))
    page = new_page(browser)
    page.add_init_script(RECORD_CLOSES)
    sign_in(page, offline_server)

    started = time.monotonic()
    page.goto(offline_server + "/?session=long")
    latest = page.locator(".msg.assistant", has_text=LATEST)
    expect(latest).to_be_in_viewport()
    opened = time.monotonic() - started
    print(f"\n{size / 1e6:.1f} MB of entry text: latest message shown in {opened:.2f} s")

    log = page.locator("#log")
    marker = page.locator(".history-start")
    for _ in range(100):
        if marker.get_attribute("data-more") == "false":
            break
        shown = page.locator("#log > *").count()
        log.evaluate("log => { log.scrollTop = 0; }")
        page.wait_for_function(
            "n => document.querySelectorAll('#log > *').length > n"
            " || document.querySelector('.history-start').dataset.more === 'false'",
            arg=shown,
        )
    log.evaluate("log => { log.scrollTop = 0; }")
    expect(marker).to_have_text("Beginning of the conversation")
    expect(page.locator(".msg.user", has_text=FIRST)).to_be_in_viewport()
    assert page.locator(".msg.user", has_text="😀😀😀").count() == 1
    assert page.locator(".msg.user", has_text="big 11 ").count() == 1
    assert page.locator("#connection").get_attribute("data-state") == "open"
    assert 1011 not in page.evaluate("window.closeCodes")


@pytest.fixture
def small_window_server(alice):
    """The app with a small snapshot budget, so a short conversation has older entries."""
    with daphne(SNAPSHOT_BUDGET_BYTES="16384") as base:
        yield base


def test_a_search_hit_older_than_the_first_window_opens_at_that_entry(
    browser, small_window_server, alice
):
    from playwright.sync_api import expect

    def build():
        store = get_store()
        store.create("hits", owner_id=alice.id)
        store.append("hits", [user(f"line {n} " + "w" * 400) for n in range(1, 301)])

    in_thread(build)
    page = new_page(browser)
    sign_in(page, small_window_server, "/?session=hits")
    expect(page.locator(".msg.user[data-seq='300']")).to_be_in_viewport()
    assert page.locator(".msg.user[data-seq='20']").count() == 0

    page.goto(small_window_server + "/?session=hits&seq=20")

    found = page.locator(".msg.user[data-seq='20']")
    expect(found).to_be_in_viewport()
    expect(found).to_be_focused()
    expect(found.locator(".text")).to_contain_text("line 20 ")
    # A window around the hit, not everything after it: newer entries load further down.
    assert page.locator(".msg.user[data-seq='200']").count() == 0

    log = page.locator("#log")
    newest = page.locator(".msg.user[data-seq='300']")
    for _ in range(50):
        if newest.count():
            break
        shown = page.locator("#log .msg").count()
        log.evaluate("log => { log.scrollTop = log.scrollHeight; }")
        page.wait_for_function("n => document.querySelectorAll('#log .msg').length > n", arg=shown)
    expect(page.locator(".history-end")).to_have_count(0)
    seqs = page.locator("#log .msg.user[data-seq]").evaluate_all(
        "nodes => nodes.map((node) => Number(node.dataset.seq))"
    )
    assert seqs == list(range(seqs[0], 301))

    # A message sent from the window goes after the latest one, and shows there.
    page.goto(small_window_server + "/?session=hits&seq=20")
    expect(found).to_be_focused()
    page.fill("#prompt", "one more thing")
    page.keyboard.press("Enter")
    expect(page.locator(".msg.user", has_text="one more thing")).to_be_in_viewport()
    expect(page.locator(".msg.user[data-seq='300']")).to_have_count(1)
    assert "seq=" not in page.url


def test_a_tool_call_loaded_after_its_result_is_shown_with_it(
    browser, small_window_server, alice, settings
):
    from playwright.sync_api import expect

    from sessions_app import selectors

    settings.SNAPSHOT_BUDGET_BYTES = 16384

    def build():
        store = get_store()
        store.create("tools", owner_id=alice.id)
        store.append(
            "tools",
            [
                user("read the long file"),
                assistant(calls=[call("c1", "read", json.dumps({"path": "d/" * 700}))]),
                result("c1", "the file says " + "n" * 15_000, name="read"),
                assistant("it is a long file"),
            ],
        )
        # The first frame holds the result and the answer, not the call before them.
        return selectors.session_snapshot(session_id="tools", owner_id=alice.id)["first_seq"]

    assert in_thread(build) == 3
    page = new_page(browser)
    sign_in(page, small_window_server, "/?session=tools")

    tool = page.locator('.tool[data-call-id="c1"]')
    expect(tool.locator(".tool-state")).to_have_text("done")
    expect(tool.locator(".result")).to_contain_text("the file says nnn")
    expect(page.locator(".tool[data-result-for]")).to_have_count(0)


def test_a_message_too_large_for_a_frame_is_shown_whole(browser, small_window_server, alice):
    from playwright.sync_api import expect

    # Over a megabyte, as a tool's output or a long generated document can be.
    long_answer = "the long answer " + "word " * 240_000

    def build():
        store = get_store()
        store.create("large", owner_id=alice.id)
        store.append("large", [user("tell me everything"), assistant(long_answer)])

    in_thread(build)
    page = new_page(browser)
    sign_in(page, small_window_server, "/?session=large")

    answer = page.locator('.msg.assistant[data-seq="2"]')
    expect(answer.locator(".text")).to_have_text(long_answer.strip())
    expect(page.locator(".entry-loading")).to_have_count(0)

    # Live too: a request larger than a frame's budget comes back as a stub and is fetched.
    request = "my long request " + "again " * 4_000
    page.fill("#prompt", request)
    page.keyboard.press("Enter")
    sent = page.locator('.msg.user[data-seq="4"]')
    expect(sent.locator(".text")).to_have_text(request.strip())
    expect(page.locator(".entry-loading")).to_have_count(0)
