"""A user's own data policy (docs/design.md §21)."""

from django.conf import settings
from django.db import models


class RetentionSetting(models.Model):
    """How long a user keeps idle sessions; no row (or `retention_days` null) means the
    operator's RETENTION_DAYS."""

    owner = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="retention_setting"
    )
    retention_days = models.PositiveIntegerField(null=True, blank=True)

    def __str__(self) -> str:
        return f"retention of user {self.owner_id}: {self.retention_days or 'default'}"
