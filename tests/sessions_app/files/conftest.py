"""Every API test that uses a client runs on both store backends."""

import pytest


@pytest.fixture
def api(backend, api):
    return api


@pytest.fixture
def bob_api(backend, bob_api):
    return bob_api
