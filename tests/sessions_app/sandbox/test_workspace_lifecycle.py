"""docs/design.md §28: the workspace is part of the session. A branch gets it as it was at
the branch point and is independent afterwards; a delete takes it away (the blobs go with
the sweep); an export carries it and an import restores it; the quota counts it."""

import io
import zipfile

import pytest
from django.core.management import call_command

from sessions_app.models import Blob
from tests.builders import token_client
from tests.sessions_app.sandbox.conftest import run

pytestmark = pytest.mark.django_db(transaction=True)


def cat(api, session_id: str) -> str:
    return run(api, session_id, "cat notes.txt", "bash")["stdout"]


def test_a_branch_sees_the_files_as_they_were_and_is_independent(backend, sandbox, api):
    api.post("/api/sessions/", {"id": "parent"}, format="json")
    first = run(api, "parent", "open('notes.txt', 'w').write('first draft')")
    run(api, "parent", "open('notes.txt', 'w').write('second draft')")
    # The first turn ends two entries after its result (the answer, the turn's end).
    cut = first["entry"]["seq"] + 2

    branch = api.post("/api/sessions/parent/branch/", {"id": "child", "at_seq": cut}, format="json")
    assert branch.status_code == 201, branch.content

    assert cat(api, "child") == "first draft"
    run(api, "child", "open('notes.txt', 'w').write('branch copy')")
    assert cat(api, "child") == "branch copy"
    assert cat(api, "parent") == "second draft", "the parent's files are unchanged"
    child = api.get("/api/sessions/child/workspace/").json()
    parent = api.get("/api/sessions/parent/workspace/").json()
    assert [f["size"] for f in child["files"]] == [len("branch copy")]
    assert [f["size"] for f in parent["files"]] == [len("second draft")]


def test_deleting_the_session_removes_its_workspace(backend, sandbox, api):
    api.post("/api/sessions/", {"id": "doomed"}, format="json")
    result = run(api, "doomed", "open('only-here.txt', 'w').write('doomed bytes')")
    blob_id = result["files"][0]["id"]
    assert Blob.objects.filter(sha256=blob_id).exists()

    assert api.delete("/api/sessions/doomed/").json()["deleted"] is True
    call_command("blobs_sweep", stdout=io.StringIO())

    assert api.get("/api/sessions/doomed/workspace/").status_code == 404
    assert api.get("/api/sessions/doomed/workspace/only-here.txt").status_code == 404
    assert not Blob.objects.filter(sha256=blob_id).exists()
    api.post("/api/sessions/", {"id": "doomed"}, format="json")
    assert api.get("/api/sessions/doomed/workspace/").json() == {"as_of_seq": 0, "files": []}


def test_the_quota_counts_the_workspace(backend, sandbox, api, settings):
    settings.USER_STORAGE_QUOTA_BYTES = 100_000
    api.post("/api/sessions/", {"id": "full"}, format="json")
    kept = run(api, "full", "open('a.bin', 'wb').write(b'a' * 60_000)")
    assert [f["path"] for f in kept["files"]] == ["a.bin"]

    refused = run(api, "full", "open('b.bin', 'wb').write(b'b' * 60_000)")

    assert refused["files"] == []
    assert "USER_STORAGE_QUOTA_BYTES" in refused["stderr"]
    listing = api.get("/api/sessions/full/workspace/").json()
    assert [f["path"] for f in listing["files"]] == ["a.bin"]


def test_an_export_carries_the_workspace_and_an_import_restores_it(
    backend, sandbox, api, bob, tmp_path
):
    api.post("/api/sessions/", {"id": "travels"}, format="json")
    code = "import os\nos.makedirs('out')\nopen('out/data.bin', 'wb').write(bytes(range(256)))"
    blob_id = run(api, "travels", code)["files"][0]["id"]

    archive = zipfile.ZipFile(io.BytesIO(b"".join(api.get("/api/me/export/"))))
    assert archive.read(f"files/{blob_id}") == bytes(range(256))
    call_command("export_sessions", "--user", "alice", str(tmp_path / "out"), stdout=io.StringIO())
    out = io.StringIO()
    call_command("import_sessions", "--user", "bob", str(tmp_path / "out"), stdout=out)

    bob_api = token_client(bob)
    (imported,) = bob_api.get("/api/sessions/").json()
    listing = bob_api.get(f"/api/sessions/{imported['id']}/workspace/").json()
    assert [f["path"] for f in listing["files"]] == ["out/data.bin"], out.getvalue()
    download = bob_api.get(f"/api/sessions/{imported['id']}/workspace/out/data.bin")
    assert b"".join(download.streaming_content) == bytes(range(256))
    assert (
        run(bob_api, imported["id"], "print(len(open('out/data.bin', 'rb').read()))")["stdout"]
        == "256\n"
    )
