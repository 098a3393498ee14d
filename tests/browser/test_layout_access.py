"""Any screen, any input: the phone layout and its sessions drawer, the keyboard, drawn icons,
both colour themes, and an axe-core audit of the login and chat pages."""

import pytest
from playwright.sync_api import expect

from sessions_app.services import sessions as session_services
from sessions_app.store import get_store
from tests.browser.helpers import (
    AXE,
    ask,
    browser_test,
    in_thread,
    new_page,
    session_of,
    sign_in,
)
from tests.builders import turn_entries
from tests.fakes.llm_server import Reply

pytestmark = browser_test

ANSWER = """Here is **the plan**:

1. Read the [docs](https://example.com).
2. Run the code:

```sh
make test
```

| step | time |
|---|---:|
| build | 2 s |"""

# Everything the page always shows of a conversation, which must stay on screen at any size.
ALWAYS_ON_SCREEN = [
    ".topbar",
    "#session-title",
    "#connection",
    "#branch",
    "#export-md",
    "#export-json",
    "#delete",
    "#prompt",
    "#send",
]


def long_conversation(owner_id: int, turns: int = 25) -> str:
    """A conversation far taller than any screen, stored as real turns."""
    meta, _ = session_services.session_create(owner_id=owner_id, title="A long conversation")
    store = get_store()
    for number in range(turns):
        turn = f"turn_{number}"
        answer = f"answer {number}\n\n- one point\n- another point"
        usage = {"input_tokens": 10, "output_tokens": 10}
        store.append(meta.id, turn_entries(f"question {number}", answer, turn=turn, usage=usage))
    return meta.id


OFF_SCREEN = """selectors => selectors.filter(selector => {
    const node = document.querySelector(selector);
    if (!node || !node.checkVisibility({visibilityProperty: true})) return true;
    const box = node.getBoundingClientRect();
    return box.width === 0 || box.top < 0 || box.left < 0
        || box.bottom > innerHeight || box.right > innerWidth;
})"""


def off_screen(page, selectors: list[str]) -> list[str]:
    """The selectors whose element is not wholly inside the viewport (or not shown at all)."""
    return page.evaluate(OFF_SCREEN, selectors)


def wait_on_screen(page, selectors: list[str]) -> None:
    """Until the elements are wholly on screen (the drawer slides in)."""
    page.wait_for_function(f"selectors => ({OFF_SCREEN})(selectors).length === 0", arg=selectors)


def page_scrolls(page) -> bool:
    return page.evaluate(
        """() => {
            window.scrollTo(0, 1e6);
            return document.scrollingElement.scrollTop > 0
                || document.scrollingElement.scrollHeight > innerHeight;
        }"""
    )


@pytest.mark.parametrize("screen", ["desktop", "phone"])
def test_only_the_log_scrolls_and_the_controls_stay_on_screen(
    browser, alice, offline_server, screen
):
    session_id = in_thread(lambda: long_conversation(alice.id))
    page = new_page(browser, screen)
    sign_in(page, offline_server, f"/?session={session_id}")
    expect(page.locator(".msg.user")).to_have_count(25)
    log = page.locator("#log")

    assert log.evaluate("log => log.scrollHeight > log.clientHeight")
    assert not page_scrolls(page)
    for position in ("0", "log.scrollHeight"):
        log.evaluate(f"log => {{ log.scrollTop = {position}; }}")
        assert off_screen(page, ALWAYS_ON_SCREEN) == []
    # Opening a conversation shows its latest answer.
    log.evaluate("log => { log.scrollTop = log.scrollHeight; }")
    expect(page.locator(".msg.assistant").last).to_be_in_viewport()

    toggle = page.get_by_role("button", name="Sessions", exact=True)
    sessions = page.locator("#sessions")
    if screen == "desktop":
        expect(toggle).to_be_hidden()
        expect(sessions).to_be_visible()
        assert off_screen(page, ["#sessions", "#new-session"]) == []
        return

    # On a phone the sessions card is a drawer, closed until asked for.
    expect(sessions).to_be_hidden()
    expect(toggle).to_have_attribute("aria-expanded", "false")
    toggle.click()
    expect(sessions).to_be_visible()
    expect(toggle).to_have_attribute("aria-expanded", "true")
    current = page.locator(f'.session-item[data-session-id="{session_id}"] a')
    expect(current).to_be_focused()
    expect(current).to_have_attribute("aria-current", "page")
    wait_on_screen(page, ["#sessions", "#new-session", "#sessions-close"])
    page.keyboard.press("Escape")
    expect(sessions).to_be_hidden()
    expect(toggle).to_be_focused()
    # A tap beside the drawer closes it too; a new conversation opens from it.
    toggle.click()
    page.mouse.click(380, 400)
    expect(sessions).to_be_hidden()
    toggle.click()
    page.get_by_role("button", name="New").click()
    expect(sessions).to_be_hidden()
    expect(page).not_to_have_url(f"{offline_server}/?session={session_id}")
    expect(page.locator("#connection")).to_have_text("live")
    expect(page.locator(".empty")).to_contain_text("How can I help?")
    assert not page_scrolls(page)


@pytest.mark.parametrize("screen", ["desktop", "phone"])
def test_the_title_stays_while_the_cost_is_on_its_way(browser, alice, offline_server, screen):
    # Until the first status arrives the cost is empty and the row of tools at its narrowest:
    # it once fitted beside the title's row and squeezed the title to nothing.
    meta, _ = in_thread(lambda: session_services.session_create(owner_id=alice.id, title="Plans"))
    page = new_page(browser, screen)
    sign_in(page, offline_server, f"/?session={meta.id}")
    expect(page.locator("#session-title")).to_have_text("Plans")
    page.locator("#cost").evaluate("cost => { cost.textContent = ''; }")
    assert off_screen(page, ALWAYS_ON_SCREEN) == []


# Where keyboard focus must be able to go: (name used in failures, selector).
KEYBOARD_STOPS = {
    "skip link": ".skip-link",
    "sign out": ".topbar button[type=submit]",
    "branch": "#branch",
    "export md": "#export-md",
    "export json": "#export-json",
    "delete": "#delete",
    "log": "#log",
    "edit": ".edit-message",
    "tool call": "details.tool > summary",
    "copy code": ".copy-code",
    "regenerate": ".regenerate",
    "prompt": "#prompt",
    "send": "#send",
    "new session": "#new-session",
    "session link": ".session-link",
    "delete session": ".delete-session",
    "sessions toggle": "#sessions-toggle",
}
DESCRIBE_FOCUS = """stops => {
    const node = document.activeElement;
    if (node === document.body) return {name: "body"};
    const name = Object.keys(stops).find(key => node.matches(stops[key])) || node.outerHTML.slice(0, 80);
    const label = (node.getAttribute("aria-label") || (node.labels && node.labels[0] && node.labels[0].textContent)
        || node.textContent || node.getAttribute("title") || "").trim();
    // The composer shows focus on its whole box (a ring around the text and the button).
    const ring = node.id === "prompt" ? node.closest(".composer-box") : node;
    const style = getComputedStyle(ring);
    const visible = (style.outlineStyle !== "none" && parseFloat(style.outlineWidth) > 0)
        || style.boxShadow !== "none";
    let shown = true;
    for (let up = node; up; up = up.parentElement) {
        if (getComputedStyle(up).opacity === "0") shown = false;
    }
    return {name, label, visible, shown};
}"""


@pytest.mark.parametrize("screen", ["desktop", "phone"])
def test_every_control_is_reachable_labelled_and_shows_focus(browser, model, model_server, screen):
    model.script(Reply(calls=[("calculator", {"expression": "6*7"})]), Reply(text=ANSWER))
    page = new_page(browser, screen)
    sign_in(page, model_server)
    ask(page, "make a plan")
    page.locator("#cost:not(:empty)").wait_for()
    page.locator("body").click(position={"x": 1, "y": 300})  # start from the page, not a field

    seen = {}
    for _ in range(60):
        page.keyboard.press("Tab")
        focus = page.evaluate(DESCRIBE_FOCUS, KEYBOARD_STOPS)
        if focus["name"] != "body":  # focus leaving the page wraps around through it
            seen.setdefault(focus["name"], focus)
    missing = [name for name in KEYBOARD_STOPS if name not in seen]
    expected_missing = (
        ["sessions toggle"]
        if screen == "desktop"
        else ["new session", "session link", "delete session"]  # inside the closed drawer
    )
    assert missing == expected_missing, seen.keys()
    for name, focus in seen.items():
        assert focus["label"], f"{name} has no accessible name"
        assert focus["visible"], f"{name} shows no focus ring"
        assert focus["shown"], f"{name} is invisible while focused"

    # The live region tells a screen reader what happened, not every streamed word.
    expect(page.locator("#announcer")).to_have_attribute("aria-live", "polite")
    expect(page.locator("#announcer")).to_contain_text("Jarvis answered: Here is the plan")


def test_icons_are_drawn_not_font_glyphs(browser, model, model_server):
    model.script(Reply(calls=[("calculator", {"expression": "6*7"})]), Reply(text=ANSWER))
    page = new_page(browser, "desktop")
    sign_in(page, model_server)
    ask(page, "make a plan")
    result = page.evaluate(
        """() => ({
            uses: document.querySelectorAll("svg use").length,
            broken: [...document.querySelectorAll("svg use")]
                .map(use => use.getAttribute("href"))
                .filter(href => !document.querySelector(href)),
            chrome: [...document.querySelectorAll(
                ".topbar, .chat-head, .composer, #sessions, .msg-actions, .code-head, details.tool > summary, .who"
            )].map(node => node.innerText).join(" "),
        })"""
    )
    assert result["uses"] > 10 and result["broken"] == []
    # Only characters every text font has (Latin-1 and a few common punctuation marks): no
    # symbol that could render as an empty box.
    rare = {ch for ch in result["chrome"] if ord(ch) > 0xFF and ch not in "…·—“”’"}
    assert rare == set(), rare


def axe_audit(page) -> list[str]:
    """Serious and critical violations of axe-core's WCAG 2 A/AA rules and best practices."""
    # Evaluated rather than added as a <script>: a page with a Content-Security-Policy (the
    # shared page's) refuses an injected script tag, and the audit must see that page as a
    # reader gets it, policy on.
    page.evaluate(AXE.read_text())
    # Colours change with a short transition after a theme switch or a focus move: audit the
    # settled page, not a frame in between (wait for every finite animation to finish).
    violations = page.evaluate(
        """async () => {
            const finite = document.getAnimations().filter(
                a => a.effect && a.effect.getComputedTiming().endTime !== Infinity);
            await Promise.all(finite.map(a => a.finished.catch(() => null)));
            return (await axe.run(document, {resultTypes: ["violations"]})).violations;
        }"""
    )
    return [
        f"{v['id']} ({v['impact']}): {v['help']} — "
        + "; ".join(node["target"][0] for node in v["nodes"][:5])
        for v in violations
        if v["impact"] in ("serious", "critical")
    ]


@pytest.mark.parametrize("screen", ["desktop", "phone"])
def test_axe_finds_no_serious_violation_in_either_theme(browser, model, model_server, screen):
    model.script(
        Reply(calls=[("calculator", {"expression": "6*7"})]),
        Reply(text=ANSWER),
        Reply(status=400, error="the model refused the request"),
    )
    page = new_page(browser, screen)
    page.goto(model_server + "/accounts/login/")
    page.fill("#id_username", "alice")
    page.fill("#id_password", "wrong")
    page.click("button[type=submit]")
    expect(page.get_by_role("alert")).to_contain_text("didn't match")
    for scheme, background in (("light", "rgb(245, 246, 248)"), ("dark", "rgb(14, 16, 20)")):
        page.emulate_media(color_scheme=scheme)
        assert page.evaluate("getComputedStyle(document.body).backgroundColor") == background
        assert axe_audit(page) == [], f"login page, {scheme}"

    page.emulate_media(color_scheme="light")
    sign_in(page, model_server)
    session_id = session_of(page)
    ask(page, "make a plan")
    ask(page, "and now fail")
    expect(page.locator(".turn-status")).to_contain_text("The answer failed")
    page.evaluate(
        """async path => {
            const token = document.cookie.match(/csrftoken=([^;]+)/)[1];
            await fetch(path, {method: "POST", credentials: "same-origin",
                headers: {"Content-Type": "application/json", "X-CSRFToken": token},
                body: JSON.stringify({message_id: "n1", content: "Time to **stretch**."})});
        }""",
        f"/api/sessions/{session_id}/proactive/",
    )
    expect(page.locator(".msg.proactive")).to_have_count(1)
    page.locator("#cost:not(:empty)").wait_for()
    page.locator("details.tool > summary").first.click()
    page.get_by_role("button", name="Copy code").focus()
    for scheme, background in (("light", "rgb(245, 246, 248)"), ("dark", "rgb(14, 16, 20)")):
        page.emulate_media(color_scheme=scheme)
        assert page.evaluate("getComputedStyle(document.body).backgroundColor") == background
        assert axe_audit(page) == [], f"chat page, {scheme}"
        if screen == "phone":
            page.get_by_role("button", name="Sessions", exact=True).click()
            expect(page.locator("#sessions")).to_be_visible()
            assert axe_audit(page) == [], f"chat page with the drawer open, {scheme}"
            page.keyboard.press("Escape")
            expect(page.locator("#sessions")).to_be_hidden()
