"""`retention_days` (docs/design.md §21) and `memory_in_context` (§22) in `GET/PATCH
/api/me/`, as settings sections of notices_app.services.me."""

from __future__ import annotations

from django.conf import settings
from rest_framework import serializers

from accounts_app.retention import retention_days_of, retention_days_set
from memory_app.context import memory_in_context_of
from memory_app.services import memory_in_context_set
from notices_app.services.me import OnOff, SettingsSection


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


class MemoryPatchInput(serializers.Serializer):
    memory_in_context = OnOff(
        required=False,
        help_text="profile facts and approved procedures go into the model's system prompt",
    )


def _memory_read(user) -> dict:
    return {"memory_in_context": memory_in_context_of(owner_id=user.pk)}


def _memory_update(user, data: dict) -> None:
    memory_in_context_set(owner_id=user.pk, enabled=data["memory_in_context"])


# docs/design.md §22: memory in the model's context, off per person.
MEMORY_SECTION = SettingsSection("memory", MemoryPatchInput, _memory_read, _memory_update)
