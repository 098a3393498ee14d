"""The server's VAPID key pair (RFC 8292), from VAPID_PRIVATE_KEY / VAPID_PUBLIC_KEY.

The private key is accepted as PEM or as the base64url raw 32-byte scalar (what
`manage.py make_vapid_keys` prints). The public key is the page's `applicationServerKey`:
base64url of the uncompressed point. A key that does not parse, or a public key that is not
the private key's, stops start-up (NoticesAppConfig.ready) instead of failing every push.
"""

from __future__ import annotations

import base64
from functools import lru_cache

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def b64url_decode(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def public_key_text(private_key: ec.EllipticCurvePrivateKey) -> str:
    return b64url(
        private_key.public_key().public_bytes(
            serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint
        )
    )


def private_key_text(private_key: ec.EllipticCurvePrivateKey) -> str:
    return b64url(private_key.private_numbers().private_value.to_bytes(32, "big"))


def _parse_private(text: str) -> ec.EllipticCurvePrivateKey:
    text = text.strip()
    try:
        if text.startswith("-----BEGIN"):
            key = serialization.load_pem_private_key(text.encode(), password=None)
        else:
            raw = b64url_decode(text)
            if len(raw) != 32:
                raise ValueError("a raw key is 32 bytes")
            key = ec.derive_private_key(int.from_bytes(raw, "big"), ec.SECP256R1())
    except ValueError as error:
        raise ImproperlyConfigured(f"VAPID_PRIVATE_KEY does not parse: {error}") from error
    if not isinstance(key, ec.EllipticCurvePrivateKey) or key.curve.name != "secp256r1":
        raise ImproperlyConfigured("VAPID_PRIVATE_KEY must be a P-256 (prime256v1) EC key")
    return key


@lru_cache(maxsize=4)
def _keys(private_text: str, public_text: str) -> tuple[ec.EllipticCurvePrivateKey, str] | None:
    if not private_text:
        return None
    private_key = _parse_private(private_text)
    derived = public_key_text(private_key)
    if public_text and public_text.rstrip("=") != derived:
        raise ImproperlyConfigured("VAPID_PUBLIC_KEY is not the public key of VAPID_PRIVATE_KEY")
    return private_key, derived


def vapid_keys() -> tuple[ec.EllipticCurvePrivateKey, str] | None:
    """(private key, public key text), or None when Web Push is not configured."""
    return _keys(settings.VAPID_PRIVATE_KEY, settings.VAPID_PUBLIC_KEY)


def vapid_public_key() -> str:
    """The page's applicationServerKey; "" when Web Push is off."""
    keys = vapid_keys()
    return keys[1] if keys is not None else ""
