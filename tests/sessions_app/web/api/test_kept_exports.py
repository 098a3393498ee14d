"""docs/design.md §31, "export before you delete": an export is the person's copy. It still
downloads after the session is deleted, the delete's answer says where, and it goes with the
account or EXPORT_RETENTION_DAYS after it was written."""

from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from django.utils import timezone

from sessions_app.runtime.turn.turns import turn_run
from sessions_app.services import sessions

pytestmark = pytest.mark.django_db


def a_chat(owner, session_id: str, text: str) -> None:
    sessions.session_create(session_id=session_id, owner_id=owner.id)
    turn_run(session_id=session_id, text=text)


def sweep(as_of) -> str:
    out = StringIO()
    call_command("retention_sweep", "--as-of", as_of.isoformat(), stdout=out)
    return out.getvalue()


def test_an_export_made_before_a_delete_downloads_after_it(backend, api, alice):
    a_chat(alice, "trip:1", "my locker code is 4411")
    exported = api.get("/api/sessions/trip:1/export/?format=md")
    assert exported.status_code == 200
    assert exported["Content-Location"] == "/api/me/exports/trip_1.md/"
    as_json = api.get("/api/sessions/trip:1/export/?format=json").content

    deleted = api.delete("/api/sessions/trip:1/")

    assert deleted.status_code == 200
    answer = deleted.json()
    assert answer["deleted"] is True
    assert {export["url"] for export in answer["exports"]} == {
        "/api/me/exports/trip_1.md/",
        "/api/me/exports/trip_1.json/",
    }
    (md,) = [export for export in answer["exports"] if export["format"] == "md"]
    written = timezone.datetime.fromisoformat(md["written_at"])
    expires = timezone.datetime.fromisoformat(md["expires_at"])
    assert expires - written == timedelta(days=30)
    assert md["size"] == len(exported.content)

    assert api.get("/api/sessions/trip:1/export/?format=md").status_code == 404
    download = api.get("/api/me/exports/trip_1.md/")
    assert download.status_code == 200
    assert b"".join(download.streaming_content) == exported.content
    assert "4411" in exported.content.decode()
    assert download["Content-Disposition"] == 'attachment; filename="trip_1.md"'
    assert download["X-Content-Type-Options"] == "nosniff"
    assert b"".join(api.get("/api/me/exports/trip_1.json/").streaming_content) == as_json
    listed = api.get("/api/me/exports/").json()["exports"]
    assert sorted(export["filename"] for export in listed) == ["trip_1.json", "trip_1.md"]


def test_a_delete_without_an_export_says_there_is_none(api, alice):
    sessions.session_create(session_id="plain", owner_id=alice.id)
    assert api.delete("/api/sessions/plain/").json() == {"deleted": True, "exports": []}
    assert api.delete("/api/sessions/plain/").json() == {"deleted": False, "exports": []}


def test_only_the_owner_gets_an_export_and_a_name_reaches_nothing_else(
    api, bob_api, alice, bob, settings
):
    a_chat(alice, "secret", "the plan")
    api.get("/api/sessions/secret/export/?format=md")
    api.delete("/api/sessions/secret/")
    (settings.EXPORTS_DIR / "outside.md").write_text("not an export")

    assert bob_api.get("/api/me/exports/").json() == {"exports": []}
    for name in ("secret.md", "..", "..%2Foutside.md", ".secret.md.tmp", "secret.txt", "secret"):
        response = bob_api.get(f"/api/me/exports/{name}/")
        assert response.status_code == 404, name
        assert response.json()["code"] == "not_found"
    assert api.get("/api/me/exports/..%2Foutside.md/").status_code == 404
    assert api.get("/api/me/exports/secret.md/").status_code == 200


def test_kept_exports_go_after_export_retention_days(alice, api, settings):
    settings.EXPORT_RETENTION_DAYS = 30
    a_chat(alice, "trip", "pack the tent")
    api.get("/api/sessions/trip/export/?format=md")
    api.delete("/api/sessions/trip/")

    report = sweep(timezone.now() + timedelta(days=29))
    assert "export file" not in report
    assert api.get("/api/me/exports/trip.md/").status_code == 200

    report = sweep(timezone.now() + timedelta(days=31))
    assert "removed 1 export file(s) older than 30 days" in report
    assert api.get("/api/me/exports/trip.md/").status_code == 404
    assert api.get("/api/me/exports/").json() == {"exports": []}


def test_kept_exports_go_with_the_account(api, alice, settings):
    a_chat(alice, "trip", "pack the tent")
    api.get("/api/sessions/trip/export/?format=md")
    api.delete("/api/sessions/trip/")
    assert (settings.EXPORTS_DIR / str(alice.id) / "trip.md").exists()

    assert api.delete("/api/me/", {"confirm": "alice"}, format="json").status_code == 204

    assert not (settings.EXPORTS_DIR / str(alice.id)).exists()
