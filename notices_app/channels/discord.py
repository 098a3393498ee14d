"""Discord: each notice POSTed as `{"content": …}` to the user's own incoming webhook URL
(Discord's, or a Discord-compatible one on an allowed host; docs/design.md §16).

Retried with back-off on network errors, 5xx and 429 (after Discord's `retry_after`), at
most NOTIFY_MAX_ATTEMPTS times; any other 4xx (a deleted webhook, a bad token) gives up.
"""

from __future__ import annotations

from django.conf import settings

from jarvis_site.shared.outbound_urls import OutboundUrlRefused, outbound_target
from notices_app.channels.base import Channel, OutboundNotice, SendResult, http_post
from notices_app.channels.preferences import notice_settings_of

# Discord refuses a message over 2,000 characters.
MAX_CONTENT_CHARS = 2000


class DiscordChannel(Channel):
    name = "discord"

    @property
    def max_attempts(self) -> int:
        return settings.NOTIFY_MAX_ATTEMPTS

    def destinations(self, user) -> list[str]:
        if user is None:  # a system session: nobody's Discord
            return []
        preferences = notice_settings_of(user)
        return [""] if preferences.discord_enabled and preferences.discord_webhook_url else []

    def send(self, notice: OutboundNotice, user) -> SendResult:
        url = notice_settings_of(user).discord_webhook_url
        if not url:
            return SendResult(ok=False, detail="no Discord webhook URL any more", gone=True)
        try:
            target = outbound_target(url)
        except OutboundUrlRefused as refused:
            return SendResult(ok=False, detail=str(refused), gone=True)
        content = notice.content
        if len(content) > MAX_CONTENT_CHARS:
            content = content[: MAX_CONTENT_CHARS - 1] + "…"
        result, response = http_post(target, json={"content": content})
        if result.ok or response is None:
            return result
        if response.status_code == 429:
            return SendResult(ok=False, detail=result.detail, retry_after=_discord_wait(response))
        if 400 <= response.status_code < 500:
            return SendResult(ok=False, detail=result.detail, gone=True)
        return result


def _discord_wait(response) -> float | None:
    # Discord says how long to wait in the body (seconds, fractional) and in Retry-After.
    try:
        return float(response.json()["retry_after"])
    except (ValueError, KeyError, TypeError):
        return None
