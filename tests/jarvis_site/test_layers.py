"""The single worker's channel layer: what Channels' in-memory layer promises, kept."""

import asyncio

import pytest
from channels.exceptions import ChannelFull

from jarvis_site.shared import layers


@pytest.fixture
def clock(monkeypatch):
    """Wall and monotonic time under the test's control."""
    now = {"t": 1_000_000.0}
    monkeypatch.setattr(layers.time, "monotonic", lambda: now["t"])
    monkeypatch.setattr(layers.time, "time", lambda: now["t"])
    monkeypatch.setattr("channels.layers.time.time", lambda: now["t"])
    return now


def test_every_member_of_a_group_gets_its_own_copy():
    async def scenario():
        layer = layers.InProcessChannelLayer()
        await layer.group_add("session.a", "specific.x!one")
        await layer.group_add("session.a", "specific.x!two")
        await layer.group_add("session.b", "specific.x!three")
        message = {"type": "session.event", "event": {"items": [1, 2]}}
        await layer.group_send("session.a", message)
        message["event"]["items"].append(3)  # the sender changing it afterwards changes nothing
        one = await layer.receive("specific.x!one")
        two = await layer.receive("specific.x!two")
        one["event"]["items"].append(4)  # nor does one receiver, for the other
        return one, two, layer.channels.get("specific.x!three")

    one, two, three = asyncio.run(scenario())
    assert one["event"]["items"] == [1, 2, 4] and two["event"]["items"] == [1, 2]
    assert three is None


def test_a_full_inbox_loses_its_message_and_the_others_still_get_theirs():
    async def scenario():
        layer = layers.InProcessChannelLayer(capacity=1)
        for name in ("specific.x!full", "specific.x!free"):
            await layer.group_add("session.a", name)
        await layer.send("specific.x!full", {"type": "first"})
        with pytest.raises(ChannelFull):
            await layer.send("specific.x!full", {"type": "refused"})
        await layer.group_send("session.a", {"type": "second"})
        return [
            (await layer.receive("specific.x!full"))["type"],
            (await layer.receive("specific.x!free"))["type"],
        ]

    assert asyncio.run(scenario()) == ["first", "second"]


def test_an_expired_message_is_dropped_and_its_channel_leaves_its_groups(clock):
    async def scenario():
        layer = layers.InProcessChannelLayer(expiry=60)
        await layer.group_add("session.a", "specific.x!old")
        await layer.send("specific.x!old", {"type": "session.event"})
        clock["t"] += 61
        await layer.group_send("session.a", {"type": "session.event"})  # cleans first
        return layer

    layer = asyncio.run(scenario())
    assert "specific.x!old" not in layer.groups.get("session.a", {})


def test_cleaning_runs_at_most_once_a_second(clock, monkeypatch):
    walks = []
    monkeypatch.setattr(
        layers.InMemoryChannelLayer, "_clean_expired", lambda self: walks.append(clock["t"])
    )
    layer = layers.InProcessChannelLayer()
    for _ in range(100):
        layer._clean_expired()
    clock["t"] += layers.CLEAN_EVERY_SEC
    layer._clean_expired()
    assert len(walks) == 2
