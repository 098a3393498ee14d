"""`ensure_local_user` prints the address people must open: `make run`'s by default, the
proxy's under `make cluster` (which listens on 8080, not on 8000)."""

from io import StringIO

import pytest
from django.core.management import call_command

pytestmark = pytest.mark.django_db


def ensure(settings, tmp_path, *args) -> str:
    settings.BASE_DIR = tmp_path  # the first password is saved in var/ under it
    settings.VAR_DIR = tmp_path / "var"
    settings.VAR_DIR.mkdir(exist_ok=True)
    out = StringIO()
    call_command("ensure_local_user", *args, stdout=out)
    return out.getvalue()


def test_the_first_login_names_the_address_it_is_given(settings, tmp_path):
    first = ensure(settings, tmp_path, "--url", "http://127.0.0.1:8080/")
    assert "Open      http://127.0.0.1:8080/" in first
    assert "8000" not in first
    again = ensure(settings, tmp_path, "--url", "http://127.0.0.1:8080/")
    assert again.startswith("Log in at http://127.0.0.1:8080/ as jarvis")


def test_without_an_address_it_names_make_runs(settings, tmp_path):
    assert "Open      http://127.0.0.1:8000/" in ensure(settings, tmp_path)
    assert ensure(settings, tmp_path).startswith("Log in at http://127.0.0.1:8000/ as jarvis")
