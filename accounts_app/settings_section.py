"""`retention_days` in `GET/PATCH /api/me/` (docs/design.md §21), as a settings section of
notices_app.me."""

from __future__ import annotations

from django.conf import settings
from rest_framework import serializers

from accounts_app.retention import retention_days_of, retention_days_set
from notices_app.me import SettingsSection


class RetentionPatchInput(serializers.Serializer):
    # null: back to the operator's RETENTION_DAYS.
    retention_days = serializers.IntegerField(
        required=False, allow_null=True, min_value=1, max_value=36500
    )


def _read(user) -> dict:
    return {
        "retention_days": retention_days_of(owner_id=user.pk),
        "retention_default_days": settings.RETENTION_DAYS,
        "test_session_retention_days": settings.TEST_SESSION_RETENTION_DAYS,
    }


def _update(user, data: dict) -> None:
    retention_days_set(owner_id=user.pk, retention_days=data["retention_days"])


RETENTION_SECTION = SettingsSection("retention", RetentionPatchInput, _read, _update)
