"""The page shows how full the model's context is and where a long conversation was compacted
(docs/design.md §22): a meter (used / window) that drops once the turn compacted itself, and a
"Compacted here" marker whose summary opens on demand."""

from sessions_app.store import get_store
from tests.browser.helpers import ask, browser_test, in_thread, new_page, sign_in
from tests.builders import turn_entries

pytestmark = browser_test

PARAGRAPH = "an ordinary sentence of a long conversation about many things, " * 800  # 51 KB


def _build_long_session(owner_id: int) -> None:
    """About 600 kB of turns: more than the offline model's default window of 128k tokens."""
    store = get_store()
    store.create("long-context", owner_id=owner_id)
    for number in range(12):
        store.append(
            "long-context",
            turn_entries(
                f"part {number}: " + PARAGRAPH, f"Noted part {number}.", turn=f"t{number}"
            ),
        )


def test_a_long_conversation_compacts_itself_and_the_page_shows_where(
    browser, offline_server, alice
):
    from playwright.sync_api import expect

    in_thread(lambda: _build_long_session(alice.id))
    page = new_page(browser)
    sign_in(page, offline_server, "/?session=long-context")
    text = page.locator("#context-text")
    expect(text).to_contain_text("/ 128k context")
    meter = page.locator("#context")
    full = int(meter.get_attribute("data-used"))
    assert full > 128_000  # over the window: the next request could not be sent as it is
    expect(meter).to_have_attribute("data-over", "true")

    ask(page, "What did we talk about?")

    marker = page.locator("details.compaction")
    expect(marker).to_have_count(1)
    expect(marker.locator("summary")).to_contain_text("Compacted here")
    expect(marker.locator("summary")).to_contain_text("to fit the model's window")
    summary = marker.locator("pre")
    expect(summary).to_be_hidden()  # on demand only
    marker.locator("summary").click()
    expect(summary).to_be_visible()
    expect(summary).to_contain_text("part 0:")
    expect(meter).to_have_attribute("data-over", "false")
    assert int(meter.get_attribute("data-used")) < full / 2
