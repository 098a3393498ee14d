"""The user a manage.py command acts for, named by `--user <username>`."""

from django.contrib.auth import get_user_model
from django.core.management.base import CommandError


def owner_id_by_username(username: str) -> int:
    user = get_user_model().objects.filter(username=username).first()
    if user is None:
        raise CommandError(f"no user named {username!r}")
    return user.pk
