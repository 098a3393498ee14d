"""`make cluster` says what is missing, and how to get it, before it starts anything."""

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from tests.conftest import on_postgres

pytestmark = pytest.mark.django_db


def test_the_cluster_names_what_it_needs_when_it_is_missing(settings, tmp_path):
    settings.REDIS_URL = ""
    with pytest.raises(CommandError) as refused:
        call_command("run_cluster", "--run-dir", str(tmp_path / "cluster"))
    message = str(refused.value)
    assert "the cluster needs Redis: set REDIS_URL=" in message
    assert "apt-get install -y redis-server" in message
    assert ("the cluster needs PostgreSQL" in message) is not on_postgres()
    assert not (tmp_path / "cluster").exists()  # nothing was started


def test_the_check_alone_says_the_same_and_starts_nothing(settings, tmp_path):
    # `make cluster` runs it before its migrate, which would fail first on a missing server.
    settings.REDIS_URL = ""
    with pytest.raises(CommandError, match="the cluster needs Redis"):
        call_command("run_cluster", "--check", "--run-dir", str(tmp_path / "cluster"))
    assert not (tmp_path / "cluster").exists()
