"""docs/design.md §23: a file lives as long as a session links it. A branch shares its
parent's files; deleting a session or an account unlinks them; `blobs_sweep` removes what
nothing links to — never a blob an upload links at the same moment."""

import io
import threading

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.db import connections

from sessions_app.models import Blob, BlobLink
from sessions_app.services import files
from sessions_app.store import blobs, get_store
from tests.conftest import requires_postgres
from tests.helpers import GUARD_SEC
from tests.sessions_app.files.helpers import png_bytes, upload

pytestmark = pytest.mark.django_db(transaction=True)


def stored_files(tmp_path) -> list[bytes]:
    return [path.read_bytes() for path in (tmp_path / "blobs").rglob("*") if path.is_file()]


def sweep() -> str:
    out = io.StringIO()
    call_command("blobs_sweep", stdout=out)
    return out.getvalue()


def test_deleting_the_session_then_sweeping_removes_the_blob(backend, api, tmp_path):
    api.post("/api/sessions/", {"id": "gone"}, format="json")
    api.post("/api/sessions/", {"id": "stays"}, format="json")
    shared, alone = png_bytes(10, 10), png_bytes(12, 12, (0, 0, 255))
    upload(api, "gone", "a.png", shared)
    upload(api, "gone", "b.png", alone)
    upload(api, "stays", "a.png", shared)
    assert "0 unlinked" in sweep()  # everything is linked
    assert api.delete("/api/sessions/gone/").json() == {"deleted": True, "exports": []}
    assert sorted(stored_files(tmp_path)) == sorted([shared, alone])  # the sweep's job

    assert "1 unlinked" in sweep()

    assert stored_files(tmp_path) == [shared]
    assert Blob.objects.count() == 1


def test_a_branch_shares_its_parents_files(backend, api, tmp_path):
    api.post("/api/sessions/", {"id": "parent"}, format="json")
    png = png_bytes()
    file_id = upload(api, "parent", "p.png", png).json()["id"]
    api.post(
        "/api/sessions/parent/messages/", {"text": "hi", "attachments": [file_id]}, format="json"
    )
    branch = api.post("/api/sessions/parent/branch/", {"id": "child"}, format="json")
    assert branch.status_code == 201, branch.content
    assert api.delete("/api/sessions/parent/").json() == {"deleted": True, "exports": []}
    sweep()
    response = api.get(f"/api/sessions/child/files/{file_id}/")
    assert response.status_code == 200
    assert b"".join(response.streaming_content) == png
    assert stored_files(tmp_path) == [png]  # one copy of the bytes throughout
    again = api.post(
        "/api/sessions/child/messages/", {"text": "and?", "attachments": [file_id]}, format="json"
    )
    assert again.json()["status"] == "completed"


def test_deleting_the_account_unlinks_its_files(backend, alice, api, tmp_path):
    api.post("/api/sessions/", {"id": "mine"}, format="json")
    upload(api, "mine", "a.png", png_bytes())
    get_user_model().objects.get(pk=alice.pk).delete()
    assert BlobLink.objects.count() == 0
    sweep()
    assert stored_files(tmp_path) == []


def _unlinked_blob(session_id: str, owner_id: int, content: bytes) -> str:
    """A blob that exists (row and file) with no link left: what a sweep removes."""
    stored = files.file_upload(
        session_id=session_id,
        owner_id=owner_id,
        file=io.BytesIO(content),
        size=len(content),
        name="x",
    )
    blobs.blob_links_remove(session_id=session_id)
    return stored.id


def test_an_upload_that_links_a_blob_the_sweep_is_removing_writes_it_again(
    backend, alice, monkeypatch
):
    """The window that matters, made to happen: the upload has written the file (it was
    there) but not yet linked it when the sweep removes file and row."""
    get_store().create("keep", owner_id=alice.id)
    content = png_bytes(20, 20)
    sha = _unlinked_blob("keep", alice.id, content)
    written, go_on = threading.Event(), threading.Event()
    real_put = blobs._put

    def put_then_wait(storage, name, file):
        real_put(storage, name, file)
        if not written.is_set():
            written.set()
            assert go_on.wait(GUARD_SEC)

    monkeypatch.setattr(blobs, "_put", put_then_wait)
    results = []

    def upload_now():
        try:
            results.append(
                files.file_upload(
                    session_id="keep",
                    owner_id=alice.id,
                    file=io.BytesIO(content),
                    size=len(content),
                    name="again.png",
                )
            )
        finally:
            connections.close_all()

    uploader = threading.Thread(target=upload_now)
    uploader.start()
    assert written.wait(GUARD_SEC)
    assert blobs.blobs_sweep() == 1  # file and row removed under the uploader's feet
    go_on.set()
    uploader.join(GUARD_SEC)

    assert [stored.id for stored in results] == [sha]
    assert blobs.blob_read(sha) == content
    assert Blob.objects.filter(sha256=sha).exists()


ROUNDS = 1000


@requires_postgres
@pytest.mark.postgres
def test_the_sweep_never_loses_a_blob_an_upload_links_at_the_same_moment(alice):
    """Real threads on PostgreSQL, an uploader and a sweeper, let go together by a barrier in
    each of many rounds: whichever wins, a linked blob keeps its row and its bytes."""
    get_store().create("race", owner_id=alice.id)
    content = png_bytes(8, 8)
    sha = _unlinked_blob("race", alice.id, content)
    # The test thread readies each round (the blob unlinked again) between two crossings.
    start, end = threading.Barrier(3, timeout=GUARD_SEC), threading.Barrier(3, timeout=GUARD_SEC)
    linked: list[str] = []
    errors: list[BaseException] = []

    def uploader():
        for _round in range(ROUNDS):
            start.wait()
            try:
                linked.append(
                    files.file_upload(
                        session_id="race",
                        owner_id=alice.id,
                        file=io.BytesIO(content),
                        size=len(content),
                        name="r.png",
                    ).id
                )
            except BaseException as error:  # noqa: BLE001 - reported by the test thread
                errors.append(error)
            end.wait()
        connections.close_all()

    def sweeper():
        for _round in range(ROUNDS):
            start.wait()
            try:
                blobs.blobs_sweep()
            except BaseException as error:  # noqa: BLE001 - reported by the test thread
                errors.append(error)
            end.wait()
        connections.close_all()

    threads = [threading.Thread(target=uploader), threading.Thread(target=sweeper)]
    for thread in threads:
        thread.start()
    for round_number in range(ROUNDS):
        start.wait()
        end.wait()
        assert errors == []
        assert linked[round_number] == sha
        assert BlobLink.objects.filter(session_id="race", blob_id=sha).exists()
        assert Blob.objects.filter(sha256=sha).exists()
        assert blobs.blob_read(sha) == content
        blobs.blob_links_remove(session_id="race")
    for thread in threads:
        thread.join(GUARD_SEC)
