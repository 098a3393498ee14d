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


@pytest.mark.parametrize("serve", [False, True], ids=["daphne", "manage.py serve"])
def test_a_null_origin_is_refused_like_any_other_origin(alice_token, serve):
    """`Origin: null` (a sandboxed frame, a file:// page) is a browser page from nowhere the
    site trusts: 403, as for another site — not a 400 as if the request were malformed."""
    session_id = f"origin-{uuid.uuid4().hex[:8]}"
    with daphne(serve=serve) as server:

        async def scenario():
            for origin in ("null", "NULL", " null "):
                with pytest.raises(InvalidStatus) as refused:
                    await ws_connect(server, session_id, alice_token, origin=origin)
                assert refused.value.response.status_code == 403

        asyncio.run(scenario())
