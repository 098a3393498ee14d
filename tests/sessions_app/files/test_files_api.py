"""docs/design.md §23: uploading a file to a session and reading it back (both backends)."""

import pytest
from PIL import Image

from sessions_app.core.throttles import UploadRateThrottle
from sessions_app.models import Blob
from tests.sessions_app.files.helpers import ELF_BYTES, pdf_bytes, png_bytes, upload

pytestmark = pytest.mark.django_db


@pytest.fixture
def session_id(api):
    return api.post("/api/sessions/", {"id": "pics"}, format="json").json()["id"]


def assert_error(response, status, code):
    assert response.status_code == status, response.content
    assert response.json()["code"] == code, response.json()


def test_the_same_png_twice_is_one_file_stored_once(api, session_id, tmp_path):
    png = png_bytes(40, 30)
    first = upload(api, session_id, "screen.png", png)
    again = upload(api, session_id, "copy.png", png)
    assert first.status_code == 201, first.content
    assert again.status_code == 201
    body = first.json()
    assert body["mime"] == "image/png"
    assert (body["size"], body["width"], body["height"]) == (len(png), 40, 30)
    assert body["name"] == "screen.png"
    assert again.json()["id"] == body["id"]
    assert len(body["id"]) == 64
    assert Blob.objects.count() == 1
    stored = [path for path in (tmp_path / "blobs").rglob("*") if path.is_file()]
    assert [path.read_bytes() for path in stored] == [png]


def test_type_comes_from_the_bytes_not_the_name(api, session_id):
    text = upload(api, session_id, "notes.png", b"Grocery list: eggs, milk\n")
    assert text.status_code == 201, text.content
    assert text.json()["mime"] == "text/plain"
    assert "width" not in text.json()
    assert_error(upload(api, session_id, "cat.png", ELF_BYTES), 415, "unsupported_file")
    assert_error(upload(api, session_id, "nul.txt", b"text\x00more"), 415, "unsupported_file")
    assert_error(
        upload(api, session_id, "latin.txt", "café".encode("latin-1")), 415, "unsupported_file"
    )


def test_a_pdf_is_kept_with_its_text(api, session_id):
    response = upload(api, session_id, "report.pdf", pdf_bytes("Quarterly zebra count"))
    assert response.status_code == 201, response.content
    assert response.json()["mime"] == "application/pdf"


def test_limits_size_pixels_and_quota(api, session_id, settings):
    settings.UPLOAD_MAX_BYTES = 1000
    assert_error(upload(api, session_id, "big.txt", b"a" * 1001), 413, "too_large")
    settings.UPLOAD_MAX_BYTES = 10_000_000
    bomb = png_bytes(200, 200)
    original = Image.MAX_IMAGE_PIXELS
    Image.MAX_IMAGE_PIXELS = 100
    try:
        assert_error(upload(api, session_id, "bomb.png", bomb), 400, "image_too_large")
    finally:
        Image.MAX_IMAGE_PIXELS = original
    settings.USER_STORAGE_QUOTA_BYTES = 150
    assert upload(api, session_id, "a.txt", b"a" * 100).status_code == 201
    # The same bytes again cost nothing; new ones past the quota are refused.
    assert upload(api, session_id, "a-again.txt", b"a" * 100).status_code == 201
    assert_error(upload(api, session_id, "b.txt", b"b" * 100), 413, "quota_exceeded")
    assert Blob.objects.count() == 1


def test_the_owner_reads_the_file_and_its_thumbnail_with_safe_headers(api, session_id):
    png = png_bytes(1000, 500)
    file_id = upload(api, session_id, "wide.png", png).json()["id"]
    response = api.get(f"/api/sessions/{session_id}/files/{file_id}/")
    assert response.status_code == 200
    assert b"".join(response.streaming_content) == png
    assert response["Content-Type"] == "image/png"
    assert response["X-Content-Type-Options"] == "nosniff"
    assert "sandbox" in response["Content-Security-Policy"]
    assert response["Content-Disposition"].startswith("inline")
    thumb = api.get(f"/api/sessions/{session_id}/files/{file_id}/thumb/")
    assert thumb.status_code == 200
    assert thumb["Content-Type"] == "image/png"
    import io

    with Image.open(io.BytesIO(thumb.content)) as image:
        assert image.size == (256, 128)
    text_id = upload(api, session_id, "page.html", b"<script>alert(1)</script>").json()["id"]
    text = api.get(f"/api/sessions/{session_id}/files/{text_id}/")
    assert text["Content-Type"] == "text/plain; charset=utf-8"
    assert text["Content-Disposition"].startswith("attachment")
    assert_error(api.get(f"/api/sessions/{session_id}/files/{text_id}/thumb/"), 404, "not_found")


def test_another_user_gets_404_as_for_a_missing_session(api, bob_api, session_id):
    file_id = upload(api, session_id, "mine.png", png_bytes()).json()["id"]
    missing = bob_api.get(f"/api/sessions/no-such/files/{file_id}/")
    for path in (f"files/{file_id}/", f"files/{file_id}/thumb/"):
        response = bob_api.get(f"/api/sessions/{session_id}/{path}")
        assert response.status_code == 404
        assert response.json() == missing.json()
    assert upload(bob_api, session_id, "x.png", png_bytes()).json() == missing.json()
    # Bob's own session does not reach Alice's file either, though he knows its id.
    bob_api.post("/api/sessions/", {"id": "bobs"}, format="json")
    assert_error(bob_api.get(f"/api/sessions/bobs/files/{file_id}/"), 404, "not_found")


def test_uploads_are_throttled_per_user(api, bob_api, session_id, monkeypatch):
    # DRF reads the rates when it loads: this stands for UPLOAD_THROTTLE_RATE=2/min.
    monkeypatch.setattr(UploadRateThrottle, "THROTTLE_RATES", {"uploads": "2/min"})
    for number in range(2):
        assert (
            upload(api, session_id, f"{number}.txt", f"note {number}".encode()).status_code == 201
        )
    assert_error(upload(api, session_id, "3.txt", b"note 3"), 429, "throttled")
    bob_api.post("/api/sessions/", {"id": "bobs"}, format="json")
    assert upload(bob_api, "bobs", "b.txt", b"bob's note").status_code == 201
