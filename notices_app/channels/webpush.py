"""Web Push: each notice to every browser the user subscribed, as an encrypted (`aes128gcm`,
RFC 8291) JSON payload `{session_id, message_id, content}` signed with the server's VAPID key
(RFC 8292; docs/design.md §16). The page's service worker shows it, with the tab closed.

One outbox row per subscription: a dead browser does not hold up a live one. The push
service answering 404 or 410 means the subscription is gone: it is deleted and not retried.
Network errors, 429 and 5xx are retried with back-off, at most NOTIFY_MAX_ATTEMPTS times.
"""

from __future__ import annotations

import json
import time
from urllib.parse import urlsplit

from django.conf import settings
from py_vapid import Vapid
from pywebpush import WebPusher

from notices_app.channels.base import Channel, OutboundNotice, SendResult, http_post
from notices_app.models import PushSubscription
from notices_app.outbound_urls import OutboundUrlRefused, outbound_url_check
from notices_app.preferences import notice_settings_of
from notices_app.vapid import vapid_keys

# A VAPID token may live at most 24 hours (RFC 8292); push services refuse longer ones.
TOKEN_LIFETIME_SEC = 12 * 3600


class WebPushChannel(Channel):
    name = "webpush"

    @property
    def max_attempts(self) -> int:
        return settings.NOTIFY_MAX_ATTEMPTS

    def destinations(self, user) -> list[str]:
        if user is None or vapid_keys() is None or not notice_settings_of(user).webpush_enabled:
            return []
        return [
            str(subscription_id)
            for subscription_id in PushSubscription.objects.filter(owner_id=user.pk)
            .order_by("id")
            .values_list("id", flat=True)
        ]

    def send(self, notice: OutboundNotice, user) -> SendResult:
        keys = vapid_keys()
        if keys is None:
            return SendResult(ok=False, detail="Web Push is not configured", gone=True)
        subscription = PushSubscription.objects.filter(
            id=int(notice.destination), owner_id=user.pk
        ).first()
        if subscription is None:
            return SendResult(ok=False, detail="the browser unsubscribed", gone=True)
        try:
            outbound_url_check(subscription.endpoint)
        except OutboundUrlRefused as refused:
            return SendResult(ok=False, detail=str(refused), gone=True)
        payload = json.dumps(
            {
                "session_id": notice.session_id,
                "message_id": notice.message_id,
                "content": notice.content,
            },
            ensure_ascii=False,
        ).encode()
        body = WebPusher(
            {
                "endpoint": subscription.endpoint,
                "keys": {"p256dh": subscription.p256dh, "auth": subscription.auth},
            }
        ).encode(payload, content_encoding="aes128gcm")["body"]
        result, response = http_post(
            subscription.endpoint,
            content=body,
            headers={
                "Content-Encoding": "aes128gcm",
                "Content-Type": "application/octet-stream",
                "TTL": str(settings.WEBPUSH_TTL_SEC),
                **_vapid_headers(keys[0], subscription.endpoint),
            },
        )
        status = response.status_code if response is not None else None
        if status in {404, 410}:
            subscription.delete()
            return SendResult(ok=False, detail=result.detail, gone=True)
        if status is not None and 400 <= status < 500 and status != 429:
            return SendResult(ok=False, detail=result.detail, gone=True)
        return result


def _vapid_headers(private_key, endpoint: str) -> dict[str, str]:
    parts = urlsplit(endpoint)
    claims = {
        "sub": settings.VAPID_SUBJECT,
        "aud": f"{parts.scheme}://{parts.netloc}",
        "exp": int(time.time()) + TOKEN_LIFETIME_SEC,
    }
    return Vapid(private_key=private_key).sign(claims)
