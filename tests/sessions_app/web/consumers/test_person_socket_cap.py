"""`/ws/me/` sockets per person are capped on a worker (MAX_PERSON_SOCKETS_PER_USER): one
more is closed with 4429, another person is not affected, and a closed tab frees its place
(docs/design.md §24)."""

import pytest

from .conftest import RECEIVE_TIMEOUT, close_code, communicator

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.anyio]


async def opened(token):
    ws = communicator("/ws/me/", token)
    connected, _ = await ws.connect(timeout=RECEIVE_TIMEOUT)
    assert connected
    return ws


async def test_one_socket_past_the_cap_is_closed_and_a_closed_tab_frees_its_place(
    alice_token, bob_token, settings
):
    settings.MAX_PERSON_SOCKETS_PER_USER = 3
    tabs = [await opened(alice_token) for _ in range(3)]

    assert await close_code(communicator("/ws/me/", alice_token)) == 4429
    bobs = await opened(bob_token)
    assert await bobs.receive_nothing(timeout=0.1)

    await tabs.pop().disconnect()
    tabs.append(await opened(alice_token))
    assert await tabs[-1].receive_nothing(timeout=0.1)
    for ws in [*tabs, bobs]:
        await ws.disconnect()
