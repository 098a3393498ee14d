"""Trusted WebSocket origins are the configured site addresses only (docs/design.md §6): a
server started with the default settings on some port refuses a page on port 8000 of the
same host — which a browser would send the user's cookie from — and accepts its own page."""

import asyncio
import uuid

import pytest
from websockets.exceptions import InvalidStatus

from tests.multiprocess.clients import receive, ws_connect
from tests.multiprocess.servers import daphne

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_page_on_port_8000_cannot_open_a_socket_of_a_server_on_another_port(alice_token):
    session_id = f"origin-{uuid.uuid4().hex[:8]}"
    with daphne() as server:
        assert not server.endswith(":8000")

        async def scenario():
            with pytest.raises(InvalidStatus) as refused:
                await ws_connect(server, session_id, alice_token, origin="http://127.0.0.1:8000")
            assert refused.value.response.status_code == 403
            async with ws_connect(server, session_id, alice_token) as own_page:
                assert (await receive(own_page))["type"] == "session"

        asyncio.run(scenario())
