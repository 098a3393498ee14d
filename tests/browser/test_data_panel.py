"""The Data panel in Chromium (docs/design.md §21): the retention policy is saved and said
back, a ChatGPT export uploaded from the page comes back as its report (the regenerated
answer as a branch), and "Delete my account" waits for the typed username, then deletes
the account and leaves for the login page."""

from django.contrib.auth import get_user_model

from sessions_app.store import get_store
from tests.browser.helpers import browser_test, in_thread, new_page, sign_in
from tests.helpers import eventually
from tests.multiprocess.servers import daphne
from tests.sessions_app.formats.fixtures import chatgpt_export, regenerated_conversation

pytestmark = browser_test


def test_retention_import_and_delete_my_account(browser, alice, tmp_path):
    from playwright.sync_api import expect

    export = chatgpt_export(tmp_path / "conversations.json", regenerated_conversation())
    with daphne() as server:
        page = new_page(browser)
        sign_in(page, server)
        page.locator("#data-settings summary").click()
        status = page.locator("#data-settings-status")
        expect(page.locator("#retention-policy")).to_contain_text("kept until you delete them")

        page.fill("#retention-days", "30")
        page.locator("#retention-form button[type=submit]").click()
        expect(status).to_have_text("Saved.")
        expect(page.locator("#retention-policy")).to_contain_text("idle 30 days are deleted")

        page.set_input_files("#import-file", str(export))
        page.locator("#import-form button[type=submit]").click()
        expect(status).to_contain_text("2 imported")
        expect(page.locator("#import-report")).to_contain_text("a branch at entry 1")
        imported = in_thread(lambda: get_store().list(owner_id=alice.id))
        cuts = {meta.branched_at_seq for meta in imported if meta.title == "Capitals"}
        assert cuts == {None, 1}

        button = page.locator("#delete-account")
        expect(button).to_be_disabled()
        page.fill("#delete-confirm", "alic")
        expect(button).to_be_disabled()
        page.fill("#delete-confirm", "alice")
        expect(button).to_be_enabled()
        button.click()
        page.wait_for_url("**/accounts/login/**")
        # The page may leave before the deletion's last step: the account is made inactive
        # first, and any request of the page meanwhile (the list refreshing as sessions
        # go) is answered 401, which sends it to the login page.
        eventually(
            lambda: in_thread(lambda: not get_user_model().objects.filter(pk=alice.pk).exists()),
            what="the account is deleted",
        )
        assert in_thread(lambda: get_store().list(owner_id=alice.id)) == []
