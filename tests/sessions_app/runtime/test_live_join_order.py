"""A tab that joins a running turn gets each of its events exactly once (docs/design.md §17),
also when an event arrives after the snapshot that already holds it.

Joining a turn that runs on another worker, the snapshot's state comes back as the answer to
an `ask`, and the turn's events on another Redis connection: the answer can overtake events
it already counts. A tab that showed such an event twice saw its answer's text doubled (the
two-worker reload storm of `make bench-turns` counted 1-8 such tabs in 200)."""

import pytest

from sessions_app.runtime.live.live import LiveSocket

pytestmark = pytest.mark.anyio


async def test_events_the_snapshot_holds_are_not_sent_again_whenever_they_arrive():
    sent: list[str] = []

    async def send(text: str) -> None:
        sent.append(text)

    socket = LiveSocket("s1", send)
    # While the snapshot is read: one event it holds, one it does not.
    await socket.deliver("t1", 4, "e4")
    await socket.deliver("t1", 6, "e6")
    await socket.go_live({"turn_id": "t1", "event_seq": 5})
    # After going live: the events the answer overtook arrive, then the next one.
    await socket.deliver("t1", 5, "e5")
    await socket.deliver("t1", 3, "e3")
    await socket.deliver("t1", 7, "e7")
    # The session's next turn numbers from 1 again.
    await socket.deliver("t2", 1, "next-1")
    assert sent == ["e6", "e7", "next-1"]


async def test_a_tab_that_joined_between_turns_gets_every_event_of_the_next_one():
    sent: list[str] = []

    async def send(text: str) -> None:
        sent.append(text)

    socket = LiveSocket("s1", send)
    await socket.go_live(None)
    for seq in (1, 2, 3):
        await socket.deliver("t1", seq, f"e{seq}")
    assert sent == ["e1", "e2", "e3"]
