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

from django.conf import settings

from jarvis_site.shared.outbound_urls import OutboundTarget, OutboundUrlRefused, outbound_target
from notices_app.channels.base import Channel, OutboundNotice, SendResult, http_post
from notices_app.channels.preferences import notice_settings_of
from notices_app.core.vapid import vapid_keys
from notices_app.models import PushSubscription

# A VAPID token may live at most 24 hours (RFC 8292); push services refuse longer ones.
TOKEN_LIFETIME_SEC = 12 * 3600
# Push services take at most 4,096 bytes of encrypted body (RFC 8030 §7.2); aes128gcm adds 86
# bytes of header, a 16-byte tag and a padding byte. The text is cut to fit, the conversation
# holds it whole.
MAX_PAYLOAD_BYTES = 3993


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
            target = outbound_target(subscription.endpoint)
        except OutboundUrlRefused as refused:
            return SendResult(ok=False, detail=str(refused), gone=True)
        result, response = http_post(
            target,
            content=_encrypted(_payload(notice), subscription),
            headers={
                "Content-Encoding": "aes128gcm",
                "Content-Type": "application/octet-stream",
                "TTL": str(settings.WEBPUSH_TTL_SEC),
                **_vapid_headers(keys[0], target),
            },
        )
        status = response.status_code if response is not None else None
        if status in {404, 410}:
            subscription.delete()
            return SendResult(ok=False, detail=result.detail, gone=True)
        if status is not None and 400 <= status < 500 and status != 429:
            return SendResult(ok=False, detail=result.detail, gone=True)
        return result


def _payload(notice: OutboundNotice) -> bytes:
    """`{session_id, message_id, content}` as UTF-8 JSON, its content cut to fit a push."""
    content = notice.content
    # Every character is at least one byte: nothing longer than the limit can fit.
    cut = min(len(content), MAX_PAYLOAD_BYTES)
    while True:
        text = content if cut == len(content) else content[:cut] + "…"
        payload = json.dumps(
            {"session_id": notice.session_id, "message_id": notice.message_id, "content": text},
            ensure_ascii=False,
        ).encode()
        if len(payload) <= MAX_PAYLOAD_BYTES:
            return payload
        # A character is up to 6 bytes here (a JSON escape): dropping excess / 6 of them
        # never cuts more than needed, and a few rounds get there.
        cut -= max(1, (len(payload) - MAX_PAYLOAD_BYTES) // 6)


def _encrypted(payload: bytes, subscription: PushSubscription) -> bytes:
    """The payload encrypted for the subscription's keys (RFC 8291, `aes128gcm`)."""
    # Imported on first use: pywebpush loads aiohttp and requests, which every process would
    # pay for at start-up while only the task worker ever pushes.
    from pywebpush import WebPusher

    keys = {"p256dh": subscription.p256dh, "auth": subscription.auth}
    pusher = WebPusher({"endpoint": subscription.endpoint, "keys": keys})
    return pusher.encode(payload, content_encoding="aes128gcm")["body"]


def _vapid_headers(private_key, target: OutboundTarget) -> dict[str, str]:
    from py_vapid import Vapid  # on first use, with pywebpush (see _encrypted)

    claims = {
        "sub": settings.VAPID_SUBJECT,
        # The audience is the origin the request goes to, as the sender parsed it.
        "aud": f"{target.url.scheme}://{target.url.netloc.decode('ascii')}",
        "exp": int(time.time()) + TOKEN_LIFETIME_SEC,
    }
    return Vapid(private_key=private_key).sign(claims)
