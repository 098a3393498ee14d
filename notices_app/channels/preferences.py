"""A user's notice channels: the Discord webhook URL, which channels are on, and the
browsers subscribed to Web Push (docs/design.md §16). Every write is a service here."""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils import timezone

from jarvis_site.shared.errors import Code, DomainError
from jarvis_site.shared.outbound_urls import outbound_url_check
from notices_app.core.vapid import b64url_decode
from notices_app.models import NoticeOutbox, NoticeSettings, PushSubscription

# A browser's keys (RFC 8291): its P-256 public key as an uncompressed point, and a 16-byte
# authentication secret, both base64url.
P256DH_BYTES = 65
AUTH_BYTES = 16


class PushSubscriptionInvalid(DomainError, ValueError):
    """Keys that are not a browser's push subscription keys (400)."""

    code = Code.INVALID


class TooManyPushSubscriptions(DomainError):
    """The user already has MAX_PUSH_SUBSCRIPTIONS_PER_USER browsers subscribed (429
    too_many_subscriptions): each one is a push per notice."""

    code = Code.TOO_MANY_SUBSCRIPTIONS

    def __init__(self, limit: int):
        super().__init__(
            f"at most {limit} browsers may be subscribed to push notifications; "
            "unsubscribe one (DELETE /api/me/push-subscriptions/{id}/) first"
        )


class PushSubscriptionNotFound(DomainError, LookupError):
    """No such subscription of this user (404, for another user's too)."""

    code = Code.NOT_FOUND


def notice_settings_of(user) -> NoticeSettings:
    """The user's settings; the defaults (unsaved) when they never changed any."""
    found = NoticeSettings.objects.filter(owner_id=user.pk).first()
    return found if found is not None else NoticeSettings(owner_id=user.pk)


def notice_settings_update(
    *,
    owner_id: int,
    discord_webhook_url: str | None = None,
    discord_enabled: bool | None = None,
    webpush_enabled: bool | None = None,
) -> NoticeSettings:
    """Change the given fields (None: leave as is). A Discord URL must be on an allowed host
    (OutboundUrlRefused otherwise, and nothing changes); "" removes it."""
    if discord_webhook_url:
        outbound_url_check(discord_webhook_url)
    changes = {
        name: value
        for name, value in {
            "discord_webhook_url": discord_webhook_url,
            "discord_enabled": discord_enabled,
            "webpush_enabled": webpush_enabled,
        }.items()
        if value is not None
    }
    with transaction.atomic():
        chosen, _ = NoticeSettings.objects.select_for_update().get_or_create(owner_id=owner_id)
        for name, value in changes.items():
            setattr(chosen, name, value)
        if changes:
            chosen.save(update_fields=list(changes))
    return chosen


def push_subscription_add(
    *, owner_id: int, endpoint: str, p256dh: str, auth: str
) -> tuple[PushSubscription, bool]:
    """Record a browser's subscription (the same endpoint again updates its keys); whether it
    is new. The endpoint must be on an allowed host (OutboundUrlRefused); the keys must be
    what a browser gives (PushSubscriptionInvalid); a new endpoint needs room under
    MAX_PUSH_SUBSCRIPTIONS_PER_USER (TooManyPushSubscriptions)."""
    outbound_url_check(endpoint)
    _check_key(p256dh, "p256dh", P256DH_BYTES)
    _check_key(auth, "auth", AUTH_BYTES)
    with transaction.atomic():
        # The owner's row lock makes concurrent subscribes of one user count one after the
        # other (SQLite's single writer does the same there).
        get_user_model().objects.select_for_update().filter(pk=owner_id).exists()
        mine = PushSubscription.objects.filter(owner_id=owner_id)
        if (
            not mine.filter(endpoint=endpoint).exists()
            and mine.count() >= settings.MAX_PUSH_SUBSCRIPTIONS_PER_USER
        ):
            raise TooManyPushSubscriptions(settings.MAX_PUSH_SUBSCRIPTIONS_PER_USER)
        subscription, created = PushSubscription.objects.update_or_create(
            owner_id=owner_id,
            endpoint=endpoint,
            defaults={"p256dh": p256dh, "auth": auth},
            create_defaults={"p256dh": p256dh, "auth": auth, "created_at": timezone.now()},
        )
    return subscription, created


def _check_key(text: str, name: str, size: int) -> None:
    try:
        raw = b64url_decode(text)
    except ValueError as error:
        raise PushSubscriptionInvalid(f"keys.{name} is not base64url") from error
    if len(raw) != size or (name == "p256dh" and raw[0] != 4):
        raise PushSubscriptionInvalid(f"keys.{name} is not a push subscription's {name} key")


def push_subscription_remove(*, owner_id: int, subscription_id: int) -> None:
    deleted, _ = PushSubscription.objects.filter(id=subscription_id, owner_id=owner_id).delete()
    if not deleted:
        raise PushSubscriptionNotFound(subscription_id)


def push_subscriptions_of(user) -> list[PushSubscription]:
    return list(PushSubscription.objects.filter(owner_id=user.pk).order_by("id"))


def notice_channels_purge_for_owner(*, owner_id: int) -> dict[str, int]:
    """Delete a user's notice settings, push subscriptions and outbox rows (their account is
    being deleted); rerunning it deletes only what is left."""
    with transaction.atomic():
        return {
            "outbox": NoticeOutbox.objects.filter(owner_id=owner_id).delete()[0],
            "push_subscriptions": PushSubscription.objects.filter(owner_id=owner_id).delete()[0],
            "notice_settings": NoticeSettings.objects.filter(owner_id=owner_id).delete()[0],
        }
