"""The single worker's channel layer still forgets expired messages and memberships."""

import asyncio

import pytest

from jarvis_site import layers


@pytest.fixture
def clock(monkeypatch):
    """Wall and monotonic time under the test's control."""
    now = {"t": 1_000_000.0}
    monkeypatch.setattr(layers.time, "monotonic", lambda: now["t"])
    monkeypatch.setattr("channels.layers.time.time", lambda: now["t"])
    return now


def test_an_expired_message_is_dropped_and_its_channel_leaves_its_groups(clock):
    async def scenario():
        layer = layers.PacedInMemoryChannelLayer(expiry=60)
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
    layer = layers.PacedInMemoryChannelLayer()
    for _ in range(100):
        layer._clean_expired()
    clock["t"] += layers.CLEAN_EVERY_SEC
    layer._clean_expired()
    assert len(walks) == 2
