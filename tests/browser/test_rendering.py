"""Answers as a person reads them: rendered markdown, streamed without flicker, code that copies,
and text that can never run as code — in answers, user messages, titles, notices, tool calls."""

import pytest
from playwright.sync_api import expect

from tests.browser.helpers import ask, browser_test, new_page, session_of, sign_in
from tests.fakes.llm_server import Hold, Reply

pytestmark = browser_test

MARKDOWN = """**Bold start** of the answer, with *emphasis* and `inline code`.

## A heading

- first item
- second item

1. one
2. two

| name | value |
|:-----|------:|
| a | 1 |

See [the docs](https://example.com/docs) or https://example.org.

```python
def greet(name):
    return f"<b>{name}</b>"
```"""

CODE = 'def greet(name):\n    return f"<b>{name}</b>"\n'

# Every way text could try to become markup or a script. If any runs, it sets window.__pwned
# or opens a dialog.
XSS = (
    '<img src=x onerror="window.__pwned=1"> <script>window.__pwned=2</script> '
    "[x](javascript:window.__pwned=3) <a href=\"javascript:alert('a')\">a</a>"
)
XSS_ANSWER = f"""{XSS}

```html
<script>window.__pwned=4</script>
<img src=x onerror="window.__pwned=5">
```

<b onmouseover="window.__pwned=6">raw html</b>

<iframe src="javascript:alert('f')"></iframe>

![pic](https://example.invalid/pixel.png)

[data](data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==) [vb](vbscript:msgbox)"""


@pytest.mark.parametrize("screen", ["desktop", "phone"])
def test_answer_renders_markdown_while_streaming_without_flicker(
    browser, model, model_server, screen
):
    # The model holds its answer after "**Bold start** of the": the page is caught mid-answer
    # whatever the machine's speed, and the rest streams once the test has seen it.
    mid_answer = Hold(words=4)
    model.script(Reply(text=MARKDOWN, hold=mid_answer))
    page = new_page(browser, screen, permissions=["clipboard-read", "clipboard-write"])
    sign_in(page, model_server)
    page.fill("#prompt", "show me some markdown")
    page.keyboard.press("Enter")

    # While the answer streams, it is already rendered: catch its first paragraph then.
    try:
        page.wait_for_function(
            """() => {
                const first = document.querySelector('.msg.streaming .markdown > p');
                if (first && first.querySelector('strong')) {
                    window.firstBlock = first;
                    return true;
                }
                return false;
            }"""
        )
    finally:
        mid_answer.release()
    answer = page.locator(".msg.assistant[data-seq]").last
    expect(answer).to_be_visible()
    page.locator(".regenerate").wait_for()

    # The paragraph that streamed first is the very node of the stored answer: nothing was
    # torn down and rebuilt as text arrived, or when the answer was stored.
    assert page.evaluate(
        "() => window.firstBlock.isConnected && window.firstBlock === "
        "document.querySelector('.msg.assistant[data-seq] .markdown > p')"
    )
    text = answer.locator(".markdown")
    expect(text.locator("p strong").first).to_have_text("Bold start")
    expect(text.locator("em")).to_have_text("emphasis")
    expect(text.locator("p > code")).to_have_text("inline code")
    expect(text.locator("h2")).to_have_text("A heading")
    expect(text.locator("ul > li")).to_have_text(["first item", "second item"])
    expect(text.locator("ol > li")).to_have_text(["one", "two"])
    expect(text.locator("table th")).to_have_text(["name", "value"])
    expect(text.locator("table td").last).to_have_class("align-right")
    link = text.locator('a[href="https://example.com/docs"]')
    expect(link).to_have_text("the docs")
    expect(link).to_have_attribute("target", "_blank")
    expect(link).to_have_attribute("rel", "noopener noreferrer nofollow")
    expect(text.locator('a[href="https://example.org"]')).to_have_count(1)
    expect(text.locator(".code-block .code-language")).to_have_text("python")
    expect(text.locator("pre code.language-python")).to_have_text(CODE)
    expect(page.locator(".msg.streaming, .msg.pending")).to_have_count(0)

    # Copy puts the code itself on the clipboard and says so.
    copy = text.get_by_role("button", name="Copy code")
    copy.click()
    expect(copy).to_contain_text("Copied")
    assert page.evaluate("navigator.clipboard.readText()") == CODE
    expect(page.locator("#announcer")).to_have_text("Code copied to the clipboard.")


@pytest.mark.parametrize("screen", ["desktop", "phone"])
def test_hostile_text_stays_text_everywhere(browser, model, model_server, screen):
    model.script(
        Reply(calls=[("calculator", {"expression": XSS})]),
        Reply(text=XSS_ANSWER),
    )
    page = new_page(browser, screen)
    dialogs = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    sign_in(page, model_server)
    session_id = session_of(page)

    ask(page, XSS)  # the user message, and (as the first request) the session's title
    # A notice arrives while the page is open, through the API as a client would add one.
    status = page.evaluate(
        """async ([path, content]) => {
            const token = document.cookie.match(/csrftoken=([^;]+)/)[1];
            const response = await fetch(path, {
                method: "POST", credentials: "same-origin",
                headers: {"Content-Type": "application/json", "X-CSRFToken": token},
                body: JSON.stringify({message_id: "xss", content}),
            });
            return response.status;
        }""",
        [f"/api/sessions/{session_id}/proactive/", XSS_ANSWER],
    )
    assert status == 201
    expect(page.locator(".msg.proactive")).to_have_count(1)

    # What the user typed reads back exactly as typed.
    expect(page.locator(".msg.user .text")).to_have_text([XSS])
    expect(page.locator("#session-title")).to_contain_text("<img src=x")
    page.locator(f'.session-item[data-session-id="{session_id}"]').wait_for(state="attached")
    expect(page.locator(".session-name").first).to_contain_text("<img src=x")
    # The tool call shows its arguments as text.
    tool = page.locator("details.tool").first
    tool.locator("summary").click()
    expect(tool.locator("pre.arguments")).to_contain_text('onerror=\\"window.__pwned=1\\"')
    # The answer and the notice show the HTML as text, code fences as code.
    for message in (page.locator(".msg.assistant[data-seq]").last, page.locator(".msg.proactive")):
        markdown = message.locator(".markdown")
        expect(markdown).to_contain_text('<img src=x onerror="window.__pwned=1">')
        expect(markdown).to_contain_text("[x](javascript:window.__pwned=3)")
        expect(markdown).to_contain_text('<b onmouseover="window.__pwned=6">raw html</b>')
        expect(markdown.locator("pre code")).to_contain_text("<script>window.__pwned=4</script>")
        expect(markdown.locator("a", has_text="image: pic")).to_have_attribute(
            "href", "https://example.invalid/pixel.png"
        )

    # Reloading renders the stored history the same way: still inert.
    page.reload()
    page.locator("#connection[data-state=open]").wait_for()
    expect(page.locator(".msg.proactive")).to_have_count(1)
    page.locator(".regenerate").wait_for()
    page.locator(".msg.assistant[data-seq] .markdown").last.hover()

    hostile = page.evaluate(
        """() => ({
            pwned: window.__pwned,
            images: document.querySelectorAll("img, iframe, object, embed").length,
            scripts: [...document.scripts].filter(s => !s.src.includes("/static/")).length,
            handlers: [...document.querySelectorAll("*")]
                .filter(node => [...node.attributes].some(a => a.name.startsWith("on"))).length,
            badLinks: [...document.querySelectorAll("a[href]")]
                .filter(a => /^(javascript|data|vbscript):/i.test(a.getAttribute("href").trim())).length,
        })"""
    )
    assert hostile == {"pwned": None, "images": 0, "scripts": 0, "handlers": 0, "badLinks": 0}
    assert dialogs == []
