"""The operator's webhook: every notice of a non-test session POSTed as JSON to
NOTIFY_WEBHOOK_URL, retried with back-off until it answers 2xx (docs/design.md §14).

The URL is the operator's own setting, not a user's, so it is not held to
OUTBOUND_URL_ALLOWLIST. Every attempt carries the same `Idempotency-Key` for one notice, so
the receiver can drop a repeat.
"""

from __future__ import annotations

from django.conf import settings

from notices_app.channels.base import Channel, OutboundNotice, SendResult, http_post


class WebhookChannel(Channel):
    name = "webhook"
    max_attempts = None

    def destinations(self, user) -> list[str]:
        return [""] if settings.NOTIFY_WEBHOOK_URL else []

    def send(self, notice: OutboundNotice, user) -> SendResult:
        if not settings.NOTIFY_WEBHOOK_URL:
            return SendResult(ok=False, detail="NOTIFY_WEBHOOK_URL is not set", gone=True)
        result, _ = http_post(
            settings.NOTIFY_WEBHOOK_URL,
            json=notice.wire(),
            headers={"Idempotency-Key": f"{notice.session_id}/{notice.message_id}"},
        )
        return result
