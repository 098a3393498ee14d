"""Uploads against what happens beside them, on PostgreSQL with real threads (docs/design.md
§23, §27): a file uploaded while its session is deleted is linked to nothing the next owner
of the id can reach, and uploads at the same moment never take a person past the quota."""

import io
import threading

import pytest
from django.db import connections

from sessions_app.models import BlobLink
from sessions_app.services import deletion, files, sessions
from sessions_app.store import SessionNotFound
from sessions_app.store.blobs import owner_usage
from tests.conftest import requires_postgres
from tests.helpers import GUARD_SEC
from tests.sessions_app.files.helpers import png_bytes

pytestmark = [requires_postgres, pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def in_thread(target, outcomes: list) -> threading.Thread:
    def run():
        try:
            outcomes.append(target())
        except Exception as error:  # noqa: BLE001 - the test thread looks at it
            outcomes.append(error)
        finally:
            connections.close_all()

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def test_a_file_uploaded_while_its_session_is_deleted_is_left_to_nobody(
    alice, bob, bob_api, monkeypatch
):
    sessions.session_create(owner_id=alice.id, session_id="doomed")
    content = png_bytes(12, 12)
    # The upload has checked the session and is about to link the file: it waits there
    # while the delete runs to its end.
    checked, go_on = threading.Event(), threading.Event()
    real_link = files.blob_link

    def link_when_told(**arguments):
        checked.set()
        assert go_on.wait(GUARD_SEC)
        return real_link(**arguments)

    monkeypatch.setattr(files, "blob_link", link_when_told)
    outcomes: list = []
    uploader = in_thread(
        lambda: files.file_upload(
            session_id="doomed",
            owner_id=alice.id,
            file=io.BytesIO(content),
            size=len(content),
            name="secret.png",
        ),
        outcomes,
    )
    assert checked.wait(GUARD_SEC)
    assert deletion.session_delete(session_id="doomed", owner_id=alice.id)
    go_on.set()
    uploader.join(GUARD_SEC)

    assert isinstance(outcomes[0], SessionNotFound)
    assert not BlobLink.objects.filter(session_id="doomed").exists()
    # The next person to create the id finds nothing of it.
    assert bob_api.post("/api/sessions/", {"id": "doomed"}, format="json").status_code == 201
    (stray,) = [link.blob_id for link in BlobLink.objects.all()] or ["0" * 64]
    assert bob_api.get(f"/api/sessions/doomed/files/{stray}/").status_code == 404


def test_sixteen_uploads_at_once_never_pass_the_quota(alice, settings):
    settings.USER_STORAGE_QUOTA_BYTES = 1024 * 1024
    size = 100 * 1024
    sessions.session_create(owner_id=alice.id, session_id="many")
    contents = [bytes([65 + n]) * size for n in range(16)]  # 16 different texts
    together = threading.Barrier(16, timeout=GUARD_SEC)
    outcomes: list = []

    def upload(content):
        together.wait()
        return files.file_upload(
            session_id="many",
            owner_id=alice.id,
            file=io.BytesIO(content),
            size=size,
            name="part.txt",
        )

    threads = [in_thread(lambda content=content: upload(content), outcomes) for content in contents]
    for thread in threads:
        thread.join(GUARD_SEC)

    kept = [outcome for outcome in outcomes if not isinstance(outcome, Exception)]
    refused = [outcome for outcome in outcomes if isinstance(outcome, files.QuotaExceeded)]
    assert len(kept) + len(refused) == 16, outcomes
    assert owner_usage(alice.id) <= settings.USER_STORAGE_QUOTA_BYTES
    assert len(kept) == settings.USER_STORAGE_QUOTA_BYTES // size
