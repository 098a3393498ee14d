"""The registry of delivery channels (docs/design.md §16): one module and one class each.

A notice of a non-test session goes out through every channel listed here, to each
destination the channel names for its user. Adding a channel is a module with a `Channel`
subclass and one line below (docs/architecture.md, "Where to add a notice channel").
"""

from notices_app.channels.base import Channel
from notices_app.channels.discord import DiscordChannel
from notices_app.channels.webhook import WebhookChannel
from notices_app.channels.webpush import WebPushChannel

CHANNELS: dict[str, Channel] = {
    channel.name: channel for channel in (WebhookChannel(), WebPushChannel(), DiscordChannel())
}
