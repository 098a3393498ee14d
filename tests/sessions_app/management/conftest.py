"""Two users with sessions, for the command tests (each runs on both store backends)."""

import pytest
from django.contrib.auth import get_user_model


@pytest.fixture
def alice(transactional_db):
    return get_user_model().objects.create_user(username="alice", password="pw")


@pytest.fixture
def bob(transactional_db):
    return get_user_model().objects.create_user(username="bob", password="pw")
