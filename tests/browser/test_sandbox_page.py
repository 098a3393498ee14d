"""The sandbox in the page (docs/design.md §28): attach a CSV, ask the offline model to plot
it (`run python:`), and see the call's code highlighted, its output, the plot inline in the
conversation (still there after a reload) and the file in the Workspace panel, which
downloads it. axe-core finds nothing serious, on a laptop and on a phone."""

import re

import pytest

from tests.browser.helpers import ask, browser_test, new_page, session_of, sign_in
from tests.browser.test_layout_access import axe_audit
from tests.multiprocess.servers import daphne
from tests.sessions_app.sandbox.conftest import sandbox_python  # noqa: F401 - a fixture

pytestmark = browser_test

CSV = b"month,amount\n2026-01,120.5\n2026-02,98.25\n2026-03,143.0\n"
PLOT = """run python:
import pandas as pd
import matplotlib.pyplot as plt

spending = pd.read_csv("attachments/spending.csv")
# One bar per month.
axes = spending.plot.bar(x="month", y="amount", legend=False)
axes.figure.savefig("spending.png")
print("total", spending["amount"].sum())
"""
IMAGE_LOADED = """(alt) => {
    const image = [...document.querySelectorAll('.run-image img')].find(i => i.alt === alt);
    return image && image.complete && image.naturalWidth > 0;
}"""


@pytest.fixture
def sandbox_server(alice, tmp_path, sandbox_python):  # noqa: F811 - the imported fixture
    with daphne(BLOB_STORAGE_URL=f"file://{tmp_path / 'blobs'}") as base:
        yield base


@pytest.mark.parametrize("screen", ["desktop", "phone"])
def test_a_plot_of_an_attached_csv_shows_inline_and_in_the_workspace(
    sandbox_server, browser, screen
):
    from playwright.sync_api import expect

    page = new_page(browser, screen)
    sign_in(page, sandbox_server)
    page.set_input_files(
        "#attach-input", files=[{"name": "spending.csv", "mimeType": "text/csv", "buffer": CSV}]
    )
    expect(page.locator("#attachments .attachment")).to_have_count(1)
    expect(page.locator("#attachments .attachment.uploading")).to_have_count(0)

    ask(page, PLOT)

    call = page.locator("details.tool.run")
    expect(call).to_have_count(1)
    expect(call.locator(".tool-state")).to_have_text("done")
    # The code, highlighted: keywords, strings and comments each marked, the text intact.
    source = call.locator("pre.run-source")
    expect(source).to_have_text(PLOT.removeprefix("run python:\n"))
    expect(source.locator(".tok-keyword", has_text="import").first).to_be_visible()
    expect(source.locator(".tok-string", has_text='"spending.png"')).to_have_count(1)
    expect(source.locator(".tok-comment")).to_have_text("# One bar per month.")
    expect(call.locator(".run-outcome")).to_have_text("exit 0")
    expect(call.locator("pre.stdout")).to_have_text("total 361.75\n")
    answer = page.locator(".msg.assistant .text").last
    expect(answer).to_contain_text("The code ran (exit code 0).")
    expect(answer).to_contain_text("Files: spending.png.")

    # The plot, inline under the call, is the PNG the run wrote.
    page.wait_for_function(IMAGE_LOADED, arg="spending.png")
    image_url = page.locator(".run-image a").get_attribute("href")
    assert image_url.startswith(f"/api/sessions/{session_of(page)}/files/")
    assert page.request.get(sandbox_server + image_url).body().startswith(b"\x89PNG")

    # The Workspace panel lists it (the attachment is not the workspace's), with a download.
    files_button = page.get_by_role("button", name=re.compile(r"^Files"))
    expect(files_button).to_contain_text("1")
    files_button.click()
    expect(files_button).to_have_attribute("aria-expanded", "true")
    panel = page.get_by_role("region", name="Workspace")
    expect(panel).to_be_visible()
    links = panel.get_by_role("link")
    expect(links).to_have_count(1)
    expect(links).to_contain_text("spending.png")
    href = links.get_attribute("href")
    assert href == f"/api/sessions/{session_of(page)}/workspace/spending.png"
    download = page.request.get(sandbox_server + href)
    assert download.status == 200 and download.body().startswith(b"\x89PNG")
    assert axe_audit(page) == [], "the conversation with a run and the workspace open"

    page.keyboard.press("Escape")
    expect(panel).to_be_hidden()
    expect(files_button).to_be_focused()

    page.reload()
    page.locator("#connection[data-state=open]").wait_for()
    page.wait_for_function(IMAGE_LOADED, arg="spending.png")
    expect(page.locator("details.tool.run pre.stdout")).to_have_text("total 361.75\n")


@pytest.fixture
def no_sandbox_server(alice):
    with daphne(SANDBOX_BACKEND="none") as base:
        yield base


def test_where_no_code_runs_the_workspace_panel_says_why(no_sandbox_server, browser):
    from playwright.sync_api import expect

    page = new_page(browser)
    sign_in(page, no_sandbox_server)
    page.get_by_role("button", name=re.compile(r"^Files")).click()
    panel = page.get_by_role("region", name="Workspace")
    expect(panel).to_contain_text(
        "Code cannot run on this server: SANDBOX_BACKEND is none: this server runs no code."
    )
    expect(panel).to_contain_text("No files yet.")
