"""VAPID keys from the environment: the raw form `make_vapid_keys` prints and PEM both work;
a public key that is not the private key's stops start-up (docs/design.md §16)."""

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from django.core.exceptions import ImproperlyConfigured

from notices_app.core.vapid import private_key_text, public_key_text, vapid_keys, vapid_public_key
from tests.jarvis_site.test_settings import start_django


def test_a_pem_private_key_is_accepted_and_gives_the_public_key(settings):
    key = ec.generate_private_key(ec.SECP256R1())
    settings.VAPID_PRIVATE_KEY = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()
    settings.VAPID_PUBLIC_KEY = ""
    assert vapid_public_key() == public_key_text(key)


def test_a_public_key_of_another_pair_is_refused(settings):
    settings.VAPID_PRIVATE_KEY = private_key_text(ec.generate_private_key(ec.SECP256R1()))
    settings.VAPID_PUBLIC_KEY = public_key_text(ec.generate_private_key(ec.SECP256R1()))
    with pytest.raises(ImproperlyConfigured, match="not the public key"):
        vapid_keys()


def test_no_key_means_web_push_is_off(settings):
    settings.VAPID_PRIVATE_KEY = ""
    assert vapid_keys() is None and vapid_public_key() == ""


@pytest.mark.parametrize(
    ("environment", "message"),
    [
        (
            {"VAPID_PRIVATE_KEY": "not-a-key", "VAPID_SUBJECT": "mailto:ops@example.com"},
            "VAPID_PRIVATE_KEY does not parse",
        ),
        ({"VAPID_PRIVATE_KEY": "x", "VAPID_SUBJECT": "ops"}, "VAPID_SUBJECT must be"),
        ({"OUTBOUND_URL_ALLOWLIST": "https://discord.com/"}, "OUTBOUND_URL_ALLOWLIST"),
    ],
)
def test_a_bad_notice_setting_stops_start_up(environment, message):
    started = start_django(**environment)
    assert started.returncode != 0
    assert "ImproperlyConfigured" in started.stderr and message in started.stderr
