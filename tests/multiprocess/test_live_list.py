"""The person's live sessions list across real Daphne workers on PostgreSQL and Redis (docs/
design.md §24): a `/ws/me/` socket on worker B sees, in order, every change made over HTTP
on worker A — created, a new answer, renamed, pinned, branched, archived, deleted — and
another person's socket sees none of them."""

import asyncio
import uuid

import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus

from tests.conftest import requires_postgres
from tests.multiprocess.clients import RECEIVE_TIMEOUT, http, receive
from tests.multiprocess.redis_layer import TEST_REDIS_URL, requires_redis
from tests.multiprocess.servers import daphne

pytestmark = [
    requires_postgres,
    requires_redis,
    pytest.mark.postgres,
    pytest.mark.django_db(transaction=True),
]


def me_socket(base, token=None, origin=None):
    host = base.removeprefix("http://")
    headers = {"Authorization": f"Token {token}"} if token else {}
    return connect(
        f"ws://{host}/ws/me/",
        origin=origin or base,
        additional_headers=headers,
        open_timeout=RECEIVE_TIMEOUT,
    )


def changed(frame):
    assert frame["type"] == "session_changed", frame
    return frame["action"], frame["session"]


def test_changes_on_worker_a_reach_the_persons_tabs_on_worker_b_in_order(
    alice, alice_token, bob, bob_token
):
    session_id = f"mp-{uuid.uuid4().hex[:8]}"
    with daphne(REDIS_URL=TEST_REDIS_URL) as worker_a, daphne(REDIS_URL=TEST_REDIS_URL) as worker_b:
        api = f"{worker_a}/api/sessions/"

        def alice_changes():
            assert http("POST", api, alice_token, {"id": session_id})[0] == 201
            status, _ = http(
                "POST", f"{api}{session_id}/messages/", alice_token, {"text": "hello there"}
            )
            assert status == 200
            assert http("PATCH", f"{api}{session_id}/", alice_token, {"title": "Renamed"})[0] == 200
            assert http("PATCH", f"{api}{session_id}/", alice_token, {"pinned": True})[0] == 200
            status, branch = http("POST", f"{api}{session_id}/branch/", alice_token, {})
            assert status == 201
            assert http("PATCH", f"{api}{session_id}/", alice_token, {"archived": True})[0] == 200
            assert http("DELETE", f"{api}{session_id}/", alice_token)[0] == 200
            return branch["id"]

        async def scenario():
            async with me_socket(worker_b, alice_token) as alice_tab:
                async with me_socket(worker_b, bob_token) as bob_tab:
                    branch_id = await asyncio.to_thread(alice_changes)
                    seen = [changed(await receive(alice_tab)) for _ in range(7)]
                    # Bob's own change is the first frame his tab gets: none of Alice's came
                    # before it (they were all sent earlier, on the same ordered path).
                    status, bob_session = await asyncio.to_thread(
                        http, "POST", api, bob_token, {"title": "Bob's"}
                    )
                    assert status == 201
                    bob_seen = changed(await receive(bob_tab))
            return branch_id, seen, bob_seen, bob_session

        branch_id, seen, bob_seen, bob_session = asyncio.run(scenario())

    actions = [(action, session["id"]) for action, session in seen]
    assert actions == [
        ("created", session_id),
        ("updated", session_id),  # the answer
        ("updated", session_id),  # renamed
        ("updated", session_id),  # pinned
        ("created", branch_id),
        ("updated", session_id),  # archived
        ("deleted", session_id),
    ]
    answered, renamed, pinned, archived = seen[1][1], seen[2][1], seen[3][1], seen[5][1]
    assert answered["last_seq"] > 0 and answered["title"] == "hello there"
    assert renamed["title"] == "Renamed"
    assert (pinned["pinned"], pinned["archived"]) == (True, False)
    assert archived["archived"] is True
    assert seen[6][1] == {"id": session_id}
    assert bob_seen == ("created", bob_session)


def test_a_socket_without_a_user_or_from_another_site_is_refused(alice_token):
    with daphne() as server:

        async def scenario():
            async with me_socket(server) as anonymous:
                await anonymous.wait_closed()
                assert anonymous.close_code == 4401
            with pytest.raises(InvalidStatus) as refused:
                await me_socket(server, alice_token, origin="http://evil.example")
            assert refused.value.response.status_code == 403

        asyncio.run(scenario())
