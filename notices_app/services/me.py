"""`/api/me/`: the caller's settings, made of sections (docs/design.md §16).

Each section owns some top-level fields of the answer: it reads them for a user, and
validates and applies a PATCH of them. The view knows no field by name, so another app adds
its settings by registering a section (in its AppConfig.ready) without touching the view;
a PATCH naming a field no section owns is refused as a whole.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from django.conf import settings
from rest_framework import serializers

from notices_app.channels.preferences import (
    notice_settings_of,
    notice_settings_update,
    push_subscriptions_of,
)


@dataclass(frozen=True)
class SettingsSection:
    name: str
    # The fields a PATCH may change, every one optional (a partial update).
    patch_input: type[serializers.Serializer]
    read: Callable[[object], dict]
    # Called with the validated PATCH fields of this section (only those sent).
    update: Callable[[object, dict], None]


SECTIONS: dict[str, SettingsSection] = {}


def settings_section_register(section: SettingsSection) -> None:
    registered = SECTIONS.get(section.name)
    if registered is not None and registered != section:
        raise ValueError(f"a different settings section is already registered as {section.name!r}")
    SECTIONS[section.name] = section


# --- account ----------------------------------------------------------------------------------


class AccountPatchInput(serializers.Serializer):
    pass  # the user name is shown, not changed here


def _account_read(user) -> dict:
    return {"username": user.get_username()}


# --- notices ----------------------------------------------------------------------------------


class OnOff(serializers.BooleanField):
    """true or false, as JSON says them: not 0, 1, "yes" or "on" (a form's spellings)."""

    def to_internal_value(self, data):
        if not isinstance(data, bool):
            self.fail("invalid", input=data)
        return data


class ChannelsPatchInput(serializers.Serializer):
    webpush = OnOff(required=False)
    discord = OnOff(required=False)

    def to_internal_value(self, data):
        # `webhook` is the operator's (NOTIFY_WEBHOOK_URL): saying so beats ignoring it.
        unknown = sorted(set(data) - set(self.fields)) if isinstance(data, dict) else []
        if unknown:
            raise serializers.ValidationError(
                f"only webpush and discord can be turned on or off, not {', '.join(unknown)}"
            )
        return super().to_internal_value(data)


class NoticesPatchInput(serializers.Serializer):
    # Not trimmed: a URL with a tab or a line break anywhere is refused, not cleaned up
    # (jarvis_site.shared.outbound_urls), so what is stored is exactly what was checked.
    discord_webhook_url = serializers.CharField(
        required=False, allow_blank=True, max_length=2000, trim_whitespace=False
    )
    channels = ChannelsPatchInput(required=False)


def _notices_read(user) -> dict:
    chosen = notice_settings_of(user)
    return {
        "discord_webhook_url": chosen.discord_webhook_url,
        "channels": {
            # The operator's webhook is on for everyone or no one (NOTIFY_WEBHOOK_URL).
            "webhook": bool(settings.NOTIFY_WEBHOOK_URL),
            "webpush": chosen.webpush_enabled,
            "discord": chosen.discord_enabled,
        },
        "push_subscriptions": [
            {"id": s.id, "endpoint": s.endpoint, "created_at": s.created_at}
            for s in push_subscriptions_of(user)
        ],
    }


def _notices_update(user, data: dict) -> None:
    channels = data.get("channels", {})
    notice_settings_update(
        owner_id=user.pk,
        discord_webhook_url=data.get("discord_webhook_url"),
        webpush_enabled=channels.get("webpush"),
        discord_enabled=channels.get("discord"),
    )


settings_section_register(
    SettingsSection("account", AccountPatchInput, _account_read, lambda user, data: None)
)
settings_section_register(
    SettingsSection("notices", NoticesPatchInput, _notices_read, _notices_update)
)
