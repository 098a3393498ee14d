"""The operator's webhook: every notice of a non-test session POSTed as JSON to
NOTIFY_WEBHOOK_URL, retried with back-off until it answers 2xx (docs/design.md §14).

The URL is the operator's own setting, not a user's, so its host need not be on
OUTBOUND_URL_ALLOWLIST; the other rules for outbound URLs hold (https, the address checked at
send time; jarvis_site.shared.outbound_urls). Every attempt carries the same `Idempotency-Key` for
one notice, so the receiver can drop a repeat.
"""

from __future__ import annotations

from django.conf import settings

from jarvis_site.shared.outbound_urls import OutboundUrlRefused, outbound_target
from notices_app.channels.base import Channel, OutboundNotice, SendResult, http_post


class WebhookChannel(Channel):
    name = "webhook"
    max_attempts = None

    def destinations(self, user) -> list[str]:
        return [""] if settings.NOTIFY_WEBHOOK_URL else []

    def send(self, notice: OutboundNotice, user) -> SendResult:
        if not settings.NOTIFY_WEBHOOK_URL:
            return SendResult(ok=False, detail="NOTIFY_WEBHOOK_URL is not set", gone=True)
        try:
            target = outbound_target(settings.NOTIFY_WEBHOOK_URL, allowlisted=False)
        except OutboundUrlRefused as refused:
            return SendResult(ok=False, detail=f"NOTIFY_WEBHOOK_URL: {refused}", gone=True)
        result, _ = http_post(
            target,
            json=notice.wire(),
            headers={"Idempotency-Key": f"{notice.session_id}/{notice.message_id}"},
        )
        return result
