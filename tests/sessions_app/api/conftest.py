"""API fixtures: two users, each with a token client; every test runs on both store backends."""

import pytest
from django.contrib.auth import get_user_model
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient


def _user(username):
    return get_user_model().objects.create_user(username=username, password="pw-" + username)


@pytest.fixture
def alice(db):
    return _user("alice")


@pytest.fixture
def bob(db):
    return _user("bob")


def _token_client(user) -> APIClient:
    client = APIClient()
    token, _ = Token.objects.get_or_create(user=user)
    client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    return client


@pytest.fixture
def api(alice, backend) -> APIClient:
    return _token_client(alice)


@pytest.fixture
def bob_api(bob, backend) -> APIClient:
    return _token_client(bob)
