"""Fixtures of the multi-process tests: a user and the API token their clients send."""

import pytest
from django.contrib.auth import get_user_model
from rest_framework.authtoken.models import Token


@pytest.fixture
def user(transactional_db):
    return get_user_model().objects.create_user(username="alice", password="pw")


@pytest.fixture
def token(user):
    return Token.objects.create(user=user).key
