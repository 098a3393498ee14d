"""A real Daphne server and a client whose connection dies: the socket's send fails mid-turn
(the server closes it with 1011), the client's TCP connection is then reset without a close
frame, and the session can be deleted at once — the dead socket holds no registration."""

import json
import uuid

import pytest

from sessions_app.models import LiveConnection
from sessions_app.store import get_store
from tests.multiprocess.clients import http
from tests.multiprocess.raw_socket import TEXT, RawWebSocket
from tests.multiprocess.servers import daphne

pytestmark = pytest.mark.django_db(transaction=True)

# A message limit small enough that the server's frame of an entry outgrows it while the
# client's prompt frame (the same text, with less around it) still fits.
FRAME_LIMIT = 8192
PROMPT = "w" * (FRAME_LIMIT - 60)


def test_a_socket_failed_mid_send_and_then_reset_lets_its_session_be_deleted(alice_token):
    session_id = f"drop-{uuid.uuid4().hex[:8]}"
    args = ("--websocket-max-message-size", str(FRAME_LIMIT))
    with daphne(daphne_args=args) as server:
        ws = RawWebSocket(server, f"/ws/sessions/{session_id}/", alice_token)
        opcode, payload = ws.receive()
        assert opcode == TEXT and json.loads(payload)["type"] == "session"
        assert LiveConnection.objects.filter(session_id=session_id).count() == 1

        ws.send_text(json.dumps({"type": "prompt", "text": PROMPT}))
        # Sending the turn's first large frame fails inside the consumer; the server then
        # closes with 1011 once the consumer has ended.
        assert ws.receive_close_code() == 1011
        ws.drop()

        status, body = http("DELETE", f"{server}/api/sessions/{session_id}/", alice_token)
        assert (status, body) == (200, {"deleted": True, "exports": []})
    assert get_store().get_meta(session_id) is None
    assert not LiveConnection.objects.filter(session_id=session_id).exists()
