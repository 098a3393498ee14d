"""docs/design.md §23: a prompt's attachments reach the model as the provider takes them —
checked by the local fake server of each API, through the official SDKs — while the log keeps
ids only, and a replay (§20) rebuilds exactly what was sent."""

import base64
import io
import json
import os

import pytest
from PIL import Image

from sessions_app.store import get_store
from tests.fakes.llm_server import Reply, serving_both_sdks
from tests.helpers import eventually
from tests.sessions_app.files.helpers import pdf_bytes, png_bytes, upload

pytestmark = pytest.mark.django_db(transaction=True)

MODELS = {"openai": "openai:gpt-4o", "anthropic": "anthropic:claude-haiku-4-5"}
NOTES = "Shopping list: aubergine, quince, tamarind\n"


@pytest.fixture
def server(settings):
    with serving_both_sdks(settings) as running:
        yield running


@pytest.fixture(params=["openai", "anthropic"])
def api_name(request):
    return request.param


def new_session(api, session_id: str, model: str) -> str:
    api.post("/api/sessions/", {"id": session_id}, format="json")
    assert (
        api.patch(f"/api/sessions/{session_id}/", {"model": model}, format="json").status_code
        == 200
    )
    return session_id


def send(api, session_id: str, text: str, attachments: list[str]):
    return api.post(
        f"/api/sessions/{session_id}/messages/",
        {"text": text, "attachments": attachments},
        format="json",
    )


def test_an_image_and_a_text_file_reach_the_model_and_the_log_keeps_ids(
    backend, server, api_name, api, tmp_path
):
    session_id = new_session(api, "look", MODELS[api_name])
    png = png_bytes(40, 30)
    image = upload(api, session_id, "screen.png", png).json()
    notes = upload(api, session_id, "notes.txt", NOTES.encode(), "text/plain").json()
    server.script(Reply(text="A red square and a shopping list."))

    response = send(api, session_id, "What do you see?", [image["id"], notes["id"]])

    assert response.status_code == 200, response.content
    assert response.json()["status"] == "completed", response.json()
    assert server.refusals == []
    sent = server.requests[-1]["messages"][-1]
    encoded = base64.b64encode(png).decode()
    if api_name == "openai":
        assert sent["content"][0] == {
            "type": "image_url",
            "image_url": {"url": f"data:image/png;base64,{encoded}"},
        }
    else:
        assert sent["content"][0] == {
            "type": "image",
            "source": {"type": "base64", "media_type": "image/png", "data": encoded},
        }
    assert "aubergine, quince, tamarind" in sent["content"][1]["text"]
    assert sent["content"][-1] == {"type": "text", "text": "What do you see?"}

    # The log holds the files' ids and names, never their bytes: in the API, and on disk.
    entries = api.get(f"/api/sessions/{session_id}/entries/").json()["entries"]
    message = next(e for e in entries if e["role"] == "user")
    assert [a["id"] for a in message["data"]["attachments"]] == [image["id"], notes["id"]]
    assert message["data"]["attachments"][0] == {
        "id": image["id"],
        "name": "screen.png",
        "mime": "image/png",
        "size": len(png),
        "width": 40,
        "height": 30,
    }
    assert encoded[:40] not in json.dumps(entries)
    assert "base64" not in json.dumps(entries)
    for path in (tmp_path / "sessions").rglob("*"):
        if path.is_file():
            assert encoded[:40] not in path.read_text(errors="replace")

    # A replay of the turn is what the provider received.
    turn_id = response.json()["turn_id"]
    replay = api.get(f"/api/sessions/{session_id}/turns/{turn_id}/requests/").json()
    assert [request["body"] for request in replay["requests"]] == server.requests[-1:]


def test_a_pdf_is_sent_as_its_text(backend, server, api):
    session_id = new_session(api, "read", MODELS["openai"])
    pdf = upload(api, session_id, "report.pdf", pdf_bytes("Quarterly zebra count"), "x/y").json()
    server.script(Reply(text="Zebras."))
    assert send(api, session_id, "Summarize", [pdf["id"]]).json()["status"] == "completed"
    parts = server.requests[-1]["messages"][-1]["content"]
    assert parts[0]["type"] == "text"
    assert "[file: report.pdf]" in parts[0]["text"]
    assert "Quarterly zebra count" in parts[0]["text"]


def test_the_offline_model_is_told_what_the_image_is(backend, api):
    api.post("/api/sessions/", {"id": "blind"}, format="json")
    image = upload(api, "blind", "cat.png", png_bytes(64, 48)).json()
    response = send(api, "blind", "Look at this", [image["id"]])
    assert response.json()["status"] == "completed"
    turn_id = response.json()["turn_id"]
    body = api.get(f"/api/sessions/blind/turns/{turn_id}/requests/").json()["requests"][0]["body"]
    assert body["messages"][-1]["content"][0] == {"type": "text", "text": "[image: cat.png, 64×48]"}


def test_an_attachment_of_another_session_is_refused_and_nothing_is_stored(backend, api, bob_api):
    api.post("/api/sessions/", {"id": "one"}, format="json")
    api.post("/api/sessions/", {"id": "two"}, format="json")
    image = upload(api, "one", "a.png", png_bytes()).json()
    for attachments, status, code in (
        ([image["id"]], 404, "unknown_attachment"),
        (["0" * 64], 404, "unknown_attachment"),
        ([["nested"]], 400, "invalid"),
    ):
        response = send(api, "two", "see", attachments)
        assert response.status_code == status, response.content
        assert response.json()["code"] == code
    steer = api.post(
        "/api/sessions/one/messages/",
        {"text": "also", "attachments": [image["id"]], "mode": "steer"},
        format="json",
    )
    assert steer.status_code == 400
    assert steer.json()["code"] == "invalid"
    assert api.get("/api/sessions/two/entries/").json()["entries"] == []
    assert api.get("/api/sessions/one/entries/").json()["entries"] == []
    # Bob, sending to Alice's session, learns nothing: 404 as for a missing one.
    assert send(bob_api, "one", "see", [image["id"]]).status_code == 404


def test_a_queued_prompt_keeps_its_attachments_until_it_runs(backend, api):
    api.post("/api/sessions/", {"id": "later"}, format="json")
    image = upload(api, "later", "q.png", png_bytes(16, 9)).json()
    response = api.post(
        "/api/sessions/later/messages/",
        {"text": "when you can", "attachments": [image["id"]], "mode": "queue"},
        format="json",
    )
    assert response.status_code == 202, response.content

    def answered():
        entries = get_store().get_messages("later")
        return entries if any(e.kind == "turn_end" for e in entries) else None

    entries = eventually(answered, what="the queued prompt ran")
    (message,) = [e for e in entries if e.role == "user"]
    assert [a["id"] for a in message.data["attachments"]] == [image["id"]]


def test_twenty_images_keep_the_log_small(backend, api, tmp_path):
    """The entries name the files, never hold them: 20 photos of 5 MB each leave a log of a
    few kilobytes, in the database and in the JSONL files."""
    api.post("/api/sessions/", {"id": "album"}, format="json")
    ids = []
    for number in range(20):
        out = io.BytesIO()
        # Noise does not compress: 1300 x 1300 x 3 bytes is a PNG of about 5 MB.
        Image.frombytes("RGB", (1300, 1300), os.urandom(1300 * 1300 * 3)).save(out, format="PNG")
        assert len(out.getvalue()) > 5_000_000
        ids.append(upload(api, "album", f"photo-{number:02}.png", out.getvalue()).json()["id"])
    response = send(api, "album", "Which is the best photo?", ids)
    assert response.json()["status"] == "completed"

    entries = api.get("/api/sessions/album/entries/").json()["entries"]
    assert len(json.dumps(entries)) < 20_000
    logs = [path for path in (tmp_path / "sessions").rglob("*.jsonl")]
    assert all(path.stat().st_size < 20_000 for path in logs)


def test_an_image_too_large_for_the_provider_is_sent_scaled_down(backend, server, api_name, api):
    """Anthropic refuses an image over 5 MB (the fake server too); a 4 MB photo goes as a
    JPEG at most 1568 px on its longer side, and a replay still equals what was sent."""
    session_id = new_session(api, "big-photo", MODELS[api_name])
    out = io.BytesIO()
    Image.frombytes("RGB", (2000, 1000), os.urandom(2000 * 1000 * 3)).save(out, format="PNG")
    photo = out.getvalue()
    assert len(photo) > 4_000_000
    file_id = upload(api, session_id, "photo.png", photo).json()["id"]
    server.script(Reply(text="Noise."))

    response = send(api, session_id, "What is this?", [file_id])

    assert response.json()["status"] == "completed", response.json()
    assert server.refusals == []
    part = server.requests[-1]["messages"][-1]["content"][0]
    if api_name == "openai":
        head, _, data = part["image_url"]["url"].partition(",")
        assert head == "data:image/jpeg;base64"
    else:
        assert part["source"]["media_type"] == "image/jpeg"
        data = part["source"]["data"]
    with Image.open(io.BytesIO(base64.b64decode(data))) as sent:
        assert sent.size == (1568, 784)
    turn_id = response.json()["turn_id"]
    replay = api.get(f"/api/sessions/{session_id}/turns/{turn_id}/requests/").json()
    assert [request["body"] for request in replay["requests"]] == server.requests[-1:]
