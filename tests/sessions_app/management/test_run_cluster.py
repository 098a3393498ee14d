"""`make cluster` says what is missing, and how to get it, before it starts anything."""

import subprocess
import sys
import uuid

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection

from tests.conftest import on_postgres
from tests.helpers import GUARD_SEC, REPO, child_env
from tests.multiprocess.redis_layer import TEST_REDIS_URL

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


@pytest.mark.skipif(not on_postgres(), reason="needs DATABASE_URL pointing at PostgreSQL")
def test_a_missing_database_is_named_then_created_by_the_check_make_cluster_runs(db):
    """A fresh PostgreSQL server has no `jarvis` database: `make cluster` exactly as the README
    shows it stopped at "database jarvis does not exist"."""
    name = f"jarvis_fresh_{uuid.uuid4().hex[:8]}"
    current = connection.settings_dict
    url = f"postgres://{current['USER'] or ''}@{current['HOST']}:{current['PORT']}/{name}"

    def check(*flags):
        return subprocess.run(
            [sys.executable, "manage.py", "run_cluster", "--check", *flags],
            cwd=REPO,
            env=child_env(DATABASE_URL=url, REDIS_URL=TEST_REDIS_URL),
            capture_output=True,
            text=True,
            timeout=GUARD_SEC,
            check=False,
        )

    try:
        named = check()
        assert named.returncode != 0
        assert f"the database {name} does not exist" in named.stderr
        assert "run_cluster --check --create-database" in named.stderr
        assert not _database_exists(name)

        created = check("--create-database")
        assert f"Created the database {name}" in created.stdout, created.stderr
        assert "does not exist" not in created.stderr
        assert _database_exists(name)
    finally:
        with connection._nodb_cursor() as cursor:
            cursor.execute(f'DROP DATABASE IF EXISTS "{name}"')


def _database_exists(name: str) -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name])
        return cursor.fetchone() is not None
