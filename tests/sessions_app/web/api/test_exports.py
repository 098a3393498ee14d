"""Exports under load and across users: every download and every file is whole and its own."""

import json

import pytest
from django.conf import settings

from sessions_app.store import NewEntry, get_store
from tests.builders import token_client, user
from tests.helpers import run_in_threads

pytestmark = pytest.mark.django_db(transaction=True)

EXPORTERS = 30


def a_session(owner, session_id, text):
    get_store().create(session_id, owner_id=owner.id)
    get_store().append(session_id, [user(text)])


def test_thirty_concurrent_exports_all_succeed_whole(api, alice):
    a_session(alice, "rp-exp.1", "hello from alice")
    get_store().append("rp-exp.1", [NewEntry(role="assistant", content="x" * 50_000)])

    def export(number):
        fmt = "json" if number % 2 else "md"
        response = token_client(alice).get(f"/api/sessions/rp-exp.1/export/?format={fmt}")
        return fmt, response.status_code, response.content

    results = run_in_threads(export, EXPORTERS)
    assert [status for _, status, _ in results] == [200] * EXPORTERS
    for fmt in ("md", "json"):
        contents = {content for kind, _, content in results if kind == fmt}
        assert len(contents) == 1, "every download of the same session is the same file"
        on_disk = settings.EXPORTS_DIR / str(alice.id) / f"rp-exp_1.{fmt}"
        assert on_disk.read_bytes() == contents.pop()
    json.loads((settings.EXPORTS_DIR / str(alice.id) / "rp-exp_1.json").read_text())
    leftovers = sorted(p.name for p in (settings.EXPORTS_DIR / str(alice.id)).iterdir())
    assert leftovers == ["rp-exp_1.json", "rp-exp_1.md"], "no temp file is left behind"


def test_ids_with_the_same_safe_name_of_two_users_never_overwrite_each_other(
    api, bob_api, alice, bob
):
    a_session(alice, "rp-exp.1", "alice's secret plan")
    a_session(bob, "rp-exp_1", "bob's grocery list")
    alice_export = api.get("/api/sessions/rp-exp.1/export/?format=md")
    bob_export = bob_api.get("/api/sessions/rp-exp_1/export/?format=md")
    assert alice_export.status_code == bob_export.status_code == 200
    assert alice_export["Content-Disposition"] == bob_export["Content-Disposition"]
    alice_file = settings.EXPORTS_DIR / str(alice.id) / "rp-exp_1.md"
    bob_file = settings.EXPORTS_DIR / str(bob.id) / "rp-exp_1.md"
    assert "alice's secret plan" in alice_file.read_text()
    assert "bob's grocery list" not in alice_file.read_text()
    assert "bob's grocery list" in bob_file.read_text()
    assert "alice's secret plan" not in bob_file.read_text()
    assert alice_file.read_bytes() == alice_export.content
    assert bob_file.read_bytes() == bob_export.content
