"""`/branch` over the socket spends the same budget as `POST …/branch/` (docs/design.md §12)."""

import pytest
from asgiref.sync import sync_to_async

from sessions_app.core.throttles import BranchRateThrottle
from sessions_app.store import get_store
from tests.builders import token_client

from .conftest import RECEIVE_TIMEOUT, open_session

pytestmark = [pytest.mark.anyio, pytest.mark.django_db(transaction=True)]


async def test_slash_branch_shares_the_branch_throttle_with_http(
    backend, alice, alice_token, monkeypatch
):
    monkeypatch.setattr(BranchRateThrottle, "THROTTLE_RATES", {"branches": "2/min"})
    ws, _ = await open_session("/ws/sessions/work/", alice_token)
    api = await sync_to_async(token_client)(alice)
    response = await sync_to_async(api.post)("/api/sessions/work/branch/", {}, format="json")
    assert response.status_code == 201

    await ws.send_json_to({"type": "prompt", "text": "/branch"})
    branched = await ws.receive_json_from(timeout=RECEIVE_TIMEOUT)
    assert branched["type"] == "command_result", branched
    await ws.send_json_to({"type": "prompt", "text": "/branch"})
    refused = await ws.receive_json_from(timeout=RECEIVE_TIMEOUT)

    assert refused["type"] == "error" and refused["code"] == "throttled", refused
    owned = await sync_to_async(get_store().list)(owner_id=alice.id)
    assert len(owned) == 3  # work and its two copies, no third
    again = await sync_to_async(api.post)("/api/sessions/work/branch/", {}, format="json")
    assert again.status_code == 429 and again.json()["code"] == "throttled"
    # The socket stays usable.
    await ws.send_json_to({"type": "ping"})
    assert (await ws.receive_json_from(timeout=RECEIVE_TIMEOUT))["type"] == "pong"
    await ws.disconnect()
