"""Images through the share (docs/design.md §24, files §23): anyone holding a live link reads
the files attached to a user message the share shows, and an image's thumbnail, with the
owner's file routes' safe headers; every other file, and a revoked link, is the share's one
404, and the owner's own file routes stay closed to them."""

import io
from datetime import timedelta

import pytest
from django.utils import timezone
from PIL import Image
from rest_framework.test import APIClient

from sessions_app.core.throttles import ShareRateThrottle
from sessions_app.models import ShareLink
from tests.sessions_app.files.helpers import png_bytes, upload

pytestmark = pytest.mark.django_db

NOTES = b"Packing list: passport, charger, sunscreen\n"


def anonymous():
    return APIClient()


def send(api, session_id, text, attachments):
    response = api.post(
        f"/api/sessions/{session_id}/messages/",
        {"text": text, "attachments": attachments},
        format="json",
    )
    assert response.status_code == 200, response.content
    return response.json()


def share(api, session_id, **body):
    response = api.post(f"/api/sessions/{session_id}/shares/", body, format="json")
    assert response.status_code == 201, response.content
    return response.json()["id"], response.json()["url"].removeprefix("/s/")


@pytest.fixture
def trip(api):
    """A session with an image and a text file attached to its first prompt."""
    api.post("/api/sessions/", {"id": "trip"}, format="json")
    image = upload(api, "trip", "beach.png", png_bytes(1000, 500)).json()
    notes = upload(api, "trip", "packing.txt", NOTES, "text/plain").json()
    send(api, "trip", "What do I need for this beach?", [image["id"], notes["id"]])
    return image, notes


def unknown_share():
    return anonymous().get("/api/shared/no-such-token/").json()


def assert_no_share(response):
    assert response.status_code == 404, response.content
    assert response.json() == unknown_share()


def test_the_files_of_a_shown_message_reach_anyone_with_the_link(api, trip):
    image, notes = trip
    _, token = share(api, "trip")
    reader = anonymous()

    shown = reader.get(f"/api/shared/{token}/").json()
    prompt = next(entry for entry in shown["entries"] if entry["role"] == "user")
    assert prompt["content"] == "What do I need for this beach?"
    assert prompt["data"] == {"attachments": [image, notes]}
    assert all("data" not in entry for entry in shown["entries"] if entry["role"] != "user")

    picture = reader.get(f"/api/shared/{token}/files/{image['id']}/")
    assert picture.status_code == 200, picture.content
    assert b"".join(picture.streaming_content) == png_bytes(1000, 500)
    assert picture["Content-Type"] == "image/png"
    assert picture["X-Content-Type-Options"] == "nosniff"
    assert "sandbox" in picture["Content-Security-Policy"]
    assert picture["Content-Disposition"].startswith("inline")
    thumb = reader.get(f"/api/shared/{token}/files/{image['id']}/thumb/")
    assert thumb.status_code == 200, thumb.content
    assert thumb["Content-Type"] == "image/png"
    assert "sandbox" in thumb["Content-Security-Policy"]
    with Image.open(io.BytesIO(thumb.content)) as small:
        assert small.size == (256, 128)

    text = reader.get(f"/api/shared/{token}/files/{notes['id']}/")
    assert text.status_code == 200, text.content
    assert b"".join(text.streaming_content) == NOTES
    assert text["Content-Type"] == "text/plain; charset=utf-8"
    assert text["X-Content-Type-Options"] == "nosniff"
    assert text["Content-Disposition"].startswith("attachment")
    # A text has no thumbnail: the share's one 404.
    assert_no_share(reader.get(f"/api/shared/{token}/files/{notes['id']}/thumb/"))


def test_a_file_the_share_does_not_show_is_the_shares_404(api, bob_api, trip):
    image, _ = trip
    # Uploaded to the session, never attached to a message.
    loose = upload(api, "trip", "receipt.png", png_bytes(20, 20, (0, 90, 0))).json()
    _, token = share(api, "trip")
    # Attached after the link's upto_seq: the share does not show that message.
    later = upload(api, "trip", "later.png", png_bytes(30, 30, (0, 0, 200))).json()
    send(api, "trip", "And this one?", [later["id"]])
    # Bob's file, in a session of his: its id is no key to anything of the share.
    bob_api.post("/api/sessions/", {"id": "bobs"}, format="json")
    bobs = upload(bob_api, "bobs", "bob.png", png_bytes(10, 10, (9, 9, 9))).json()

    reader = anonymous()
    for file_id in (loose["id"], later["id"], bobs["id"], "0" * 64, "x" * 5000):
        for suffix in ("", "thumb/"):
            assert_no_share(reader.get(f"/api/shared/{token}/files/{file_id}/{suffix}"))
    assert reader.get(f"/api/shared/{token}/files/{image['id']}/").status_code == 200
    shown = reader.get(f"/api/shared/{token}/").json()
    refs = [ref["id"] for e in shown["entries"] for ref in e.get("data", {}).get("attachments", [])]
    assert later["id"] not in refs and loose["id"] not in refs


def test_a_refreshed_share_shows_the_files_sent_since(api, trip):
    share_id, token = share(api, "trip")
    later = upload(api, "trip", "later.png", png_bytes(30, 30, (0, 0, 200))).json()
    send(api, "trip", "And this one?", [later["id"]])
    reader = anonymous()
    assert_no_share(reader.get(f"/api/shared/{token}/files/{later['id']}/thumb/"))
    assert api.post(f"/api/sessions/trip/shares/{share_id}/refresh/").status_code == 200
    assert reader.get(f"/api/shared/{token}/files/{later['id']}/thumb/").status_code == 200


def test_after_revoke_and_for_an_unknown_token_the_files_are_gone(api, trip):
    image, _ = trip
    share_id, token = share(api, "trip")
    reader = anonymous()
    assert reader.get(f"/api/shared/{token}/files/{image['id']}/thumb/").status_code == 200

    assert api.delete(f"/api/sessions/trip/shares/{share_id}/").status_code == 204
    for path in (f"{token}/files/{image['id']}/", f"{token}/files/{image['id']}/thumb/"):
        assert_no_share(reader.get(f"/api/shared/{path}"))
    assert_no_share(reader.get(f"/api/shared/{'x' * 43}/files/{image['id']}/"))
    assert_no_share(reader.get(f"/api/shared/{'x' * 500}/files/{image['id']}/"))


def test_an_expired_share_and_a_deleted_session_take_their_files_along(api, trip):
    image, _ = trip
    expiring_id, expiring = share(api, "trip", expires_in_days=1)
    _, kept = share(api, "trip")
    reader = anonymous()
    assert reader.get(f"/api/shared/{expiring}/files/{image['id']}/").status_code == 200
    ShareLink.objects.filter(pk=expiring_id).update(
        expires_at=timezone.now() - timedelta(seconds=1)
    )
    assert_no_share(reader.get(f"/api/shared/{expiring}/files/{image['id']}/"))

    assert reader.get(f"/api/shared/{kept}/files/{image['id']}/").status_code == 200
    api.delete("/api/sessions/trip/")
    assert_no_share(reader.get(f"/api/shared/{kept}/files/{image['id']}/"))


def test_the_owners_file_routes_stay_closed_to_the_reader(api, trip):
    image, _ = trip
    share(api, "trip")
    reader = anonymous()
    # Without an account the sessions API asks who is calling, as for any session.
    missing = reader.get(f"/api/sessions/no-such/files/{image['id']}/")
    assert missing.status_code == 401, missing.content
    for path in (f"files/{image['id']}/", f"files/{image['id']}/thumb/"):
        response = reader.get(f"/api/sessions/trip/{path}")
        assert response.status_code == 401, response.content
        assert response.json() == missing.json()


def test_reading_shared_files_is_throttled_as_share_reads(api, trip, monkeypatch):
    # This stands for SHARE_THROTTLE_RATE=3/min: the page, the JSON and the files count alike.
    monkeypatch.setattr(ShareRateThrottle, "THROTTLE_RATES", {"shares": "3/min"})
    image, notes = trip
    _, token = share(api, "trip")
    reader = anonymous()
    answers = [
        reader.get(f"/api/shared/{token}/").status_code,
        reader.get(f"/api/shared/{token}/files/{image['id']}/thumb/").status_code,
        reader.get(f"/api/shared/{token}/files/{notes['id']}/").status_code,
    ]
    assert answers == [200, 200, 200]
    refused = reader.get(f"/api/shared/{token}/files/{image['id']}/")
    assert refused.status_code == 429 and refused.json()["code"] == "throttled"
    assert "Retry-After" in refused.headers
