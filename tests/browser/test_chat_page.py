"""The web chat in a real Chromium against a real Daphne: what a person using it sees."""

import contextlib
import re
from datetime import timedelta
from pathlib import Path

from django.utils import timezone

from sessions_app.models import LiveConnection
from sessions_app.services import connections as connection_services
from sessions_app.store import connections
from tests.browser.helpers import (
    PASSWORD,
    TIMEOUT_MS,
    USERNAME,
    browser_test,
    in_thread,
    session_of,
)
from tests.helpers import eventually
from tests.multiprocess.servers import daphne, free_port

pytestmark = browser_test


# A rename sent from the page as its own script would (the session cookie and CSRF token).
RENAME = """async ([id, title]) => {
  const token = document.cookie.match(/(?:^|;\\s*)csrftoken=([^;]+)/)[1];
  const response = await fetch("/api/sessions/" + id + "/", {
    method: "PATCH",
    headers: {"Content-Type": "application/json", "X-CSRFToken": token},
    body: JSON.stringify({title}),
  });
  if (!response.ok) throw new Error("rename: " + response.status);
}"""


def wait_until_detached(session_id: str) -> None:
    """Until the server has unregistered the sockets of a closed tab (it learns of it async)."""
    eventually(
        lambda: (
            in_thread(lambda: connection_services.live_connection_count(session_id=session_id)) == 0
        ),
        what=f"{session_id} has no live connection",
    )


def test_chat_reload_restart_branch_delete_and_export(alice, browser, tmp_path):
    from playwright.sync_api import expect

    port = free_port()
    with contextlib.ExitStack() as servers:
        server = servers.enter_context(daphne(port=port))
        _walk_through(server, browser, tmp_path, expect, restart=lambda: _restart(servers, port))


def _restart(servers, port):
    servers.close()  # stops the running Daphne, as a crash would: its sockets stay registered
    # Let the heartbeat timeout pass for the dead worker's rows instead of waiting it out.
    in_thread(
        lambda: LiveConnection.objects.update(
            heartbeat_at=timezone.now() - timedelta(seconds=connections.LIVE_TIMEOUT_SEC + 1)
        )
    )
    servers.enter_context(daphne(port=port))


def _walk_through(server, browser, tmp_path, expect, restart):
    context = browser.new_context(accept_downloads=True)
    context.set_default_timeout(TIMEOUT_MS)
    page = context.new_page()
    page.on("dialog", lambda dialog: dialog.accept())  # the delete confirmations

    # Sign in; the chat opens a new session and puts its id in the URL.
    page.goto(server + "/")
    expect(page).to_have_url(re.compile(r"/accounts/login/"))
    page.fill("#id_username", USERNAME)
    page.fill("#id_password", PASSWORD)
    page.click("button[type=submit]")
    expect(page).to_have_url(re.compile(r"\?session="))
    expect(page.locator("#connection")).to_have_text("live")
    original = session_of(page)

    # Chat with the offline model, including a tool call.
    page.fill("#prompt", "what is 17*23?")
    page.keyboard.press("Enter")
    answer = page.locator(".msg.assistant:not(.streaming) .text").last
    expect(answer).to_contain_text("391")
    tool = page.locator("details.tool").first
    expect(tool.locator(".tool-name")).to_contain_text("calculator")
    expect(tool.locator(".tool-state")).to_have_text("done")
    tool.locator("summary").click()
    expect(tool.locator("pre.result")).to_contain_text("391")
    expect(page.locator("#cost")).to_contain_text("tokens")
    page.screenshot(path=str(tmp_path / "chat.png"))

    # A reload shows the same conversation.
    page.reload()
    expect(page.locator("#connection")).to_have_text("live")
    assert session_of(page) == original
    expect(page.locator(".msg.user .text")).to_have_text(["what is 17*23?"])
    expect(page.locator(".msg.assistant:not(.streaming) .text").last).to_contain_text("391")
    expect(page.locator("details.tool")).to_have_count(1)

    # A server restart: the page notices, reconnects on its own and carries on.
    restart()
    expect(page.locator("#connection")).to_have_text("live")
    expect(page.locator(".msg.user")).to_have_count(1)
    page.fill("#prompt", "what is 2+3?")
    page.keyboard.press("Enter")
    expect(page.locator(".msg.assistant:not(.streaming) .text").last).to_contain_text("5")
    expect(page.locator(".msg.user .text")).to_have_text(["what is 17*23?", "what is 2+3?"])

    # Branch: a new session with the copied conversation, marked with its parent.
    page.click("#branch")
    expect(page).not_to_have_url(re.compile(re.escape(original)))
    expect(page.locator("#connection")).to_have_text("live")
    branch = session_of(page)
    expect(page.locator(".msg.user .text")).to_have_text(["what is 17*23?", "what is 2+3?"])
    expect(page.locator(".msg.assistant:not(.streaming) .text").last).to_contain_text("5")
    branch_row = page.locator(f'.session-item[data-session-id="{branch}"]')
    expect(branch_row.locator(".parent")).to_have_text(f"from {original}")
    expect(page.locator(f'.session-item[data-session-id="{original}"]')).to_have_count(1)

    # Export both formats as downloads named after the session.
    with page.expect_download() as md_download:
        page.click("#export-md")
    assert md_download.value.suggested_filename == f"{branch}.md"
    markdown = Path(md_download.value.path()).read_text()
    assert "what is 17*23?" in markdown and "calculator" in markdown and "391" in markdown
    with page.expect_download() as json_download:
        page.click("#export-json")
    assert json_download.value.suggested_filename == f"{branch}.json"
    assert '"tool_calls"' in Path(json_download.value.path()).read_text()

    # Deleting the original while another tab shows it is refused, with the reason.
    other_tab = context.new_page()
    other_tab.goto(f"{server}/?session={original}")
    expect(other_tab.locator("#connection")).to_have_text("live")
    original_row = page.locator(f'.session-item[data-session-id="{original}"]')
    original_row.hover()
    original_row.locator("button.delete-session").click()
    expect(original_row.locator(".row-error")).to_contain_text("session_connected")
    # The list is drawn again (here: the branch renamed, which every tab's live list hears);
    # the reason stays on its row.
    page.evaluate(RENAME, [branch, "renamed branch"])
    expect(branch_row).to_contain_text("renamed branch")
    expect(original_row.locator(".row-error")).to_contain_text("session_connected")
    other_tab.close()
    wait_until_detached(original)
    original_row.hover()
    original_row.locator("button.delete-session").click()
    expect(original_row).to_have_count(0)

    # Deleting the open session closes its socket first, then moves on to a fresh one.
    page.click("#delete")
    expect(page).not_to_have_url(re.compile(re.escape(branch)))
    expect(page.locator("#connection")).to_have_text("live")
    expect(page.locator(".msg")).to_have_count(0)
    expect(page.locator(f'.session-item[data-session-id="{branch}"]')).to_have_count(0)
    context.close()
