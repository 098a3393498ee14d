"""docs/design.md §23: exports carry a session's files as `files/<sha256>` — the zip of
`/api/me/export/` and `export_sessions` — never inside the JSON; `import_sessions` links
them again, and a file whose bytes do not match its name is left out with a note."""

import io
import json
import zipfile

import pytest
from django.core.management import call_command

from tests.builders import token_client
from tests.sessions_app.files.helpers import png_bytes, upload

pytestmark = pytest.mark.django_db(transaction=True)


def _session_with_a_picture(api, session_id="trip") -> tuple[str, bytes]:
    api.post("/api/sessions/", {"id": session_id}, format="json")
    png = png_bytes(50, 40)
    file_id = upload(api, session_id, "beach.png", png).json()["id"]
    sent = api.post(
        f"/api/sessions/{session_id}/messages/",
        {"text": "look at this", "attachments": [file_id]},
        format="json",
    )
    assert sent.json()["status"] == "completed"
    return file_id, png


def test_the_export_zip_holds_the_png_once_and_its_json_holds_the_id(backend, api, bob_api):
    file_id, png = _session_with_a_picture(api)
    _session_with_a_picture(bob_api, "bobs")

    response = api.get("/api/me/export/")

    archive = zipfile.ZipFile(io.BytesIO(b"".join(response)))
    assert [name for name in archive.namelist() if name.startswith("files/")] == [
        f"files/{file_id}"
    ]
    assert archive.read(f"files/{file_id}") == png
    session_json = archive.read("sessions/trip.json").decode()
    assert file_id in session_json
    assert "base64" not in session_json
    assert "files/<sha256>" in archive.read("README.txt").decode()


def test_export_sessions_then_import_sessions_restores_the_files(backend, api, bob, tmp_path):
    file_id, png = _session_with_a_picture(api)
    call_command("export_sessions", "--user", "alice", str(tmp_path / "out"), stdout=io.StringIO())
    assert (tmp_path / "out" / "files" / file_id).read_bytes() == png
    assert file_id in (tmp_path / "out" / "trip.jsonl").read_text()

    call_command("import_sessions", "--user", "bob", str(tmp_path / "out"), stdout=io.StringIO())

    bob_api = token_client(bob)
    (imported,) = bob_api.get("/api/sessions/").json()
    response = bob_api.get(f"/api/sessions/{imported['id']}/files/{file_id}/")
    assert response.status_code == 200
    assert b"".join(response.streaming_content) == png


def test_an_exported_file_whose_bytes_do_not_match_its_name_is_left_out(
    backend, api, bob, tmp_path
):
    file_id, _png = _session_with_a_picture(api)
    call_command("export_sessions", "--user", "alice", str(tmp_path / "out"), stdout=io.StringIO())
    (tmp_path / "out" / "files" / file_id).write_bytes(png_bytes(9, 9))
    out = io.StringIO()
    call_command("import_sessions", "--user", "bob", str(tmp_path / "out"), stdout=out)
    assert "does not hold the bytes its name says" in out.getvalue()
    bob_api = token_client(bob)
    (imported,) = bob_api.get("/api/sessions/").json()
    assert bob_api.get(f"/api/sessions/{imported['id']}/files/{file_id}/").status_code == 404
    # The conversation itself came whole, its message still naming the file.
    entries = bob_api.get(f"/api/sessions/{imported['id']}/entries/").json()["entries"]
    assert json.dumps(entries).count(file_id) == 1
