"""VAPID keys from the environment: the raw form `make_vapid_keys` prints and PEM both work;
a public key that is not the private key's stops start-up (docs/design.md §16)."""

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from django.core.exceptions import ImproperlyConfigured

from notices_app.vapid import private_key_text, public_key_text, vapid_keys, vapid_public_key


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
