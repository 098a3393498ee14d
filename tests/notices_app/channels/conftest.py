"""Fakes for the delivery channels: real HTTP servers on 127.0.0.1 standing in for a push
service, a Discord webhook and the operator's webhook, and a browser's push subscription
whose keys decrypt what the push service received."""

import json
import os
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import http_ece
import pytest
from cryptography.hazmat.primitives.asymmetric import ec
from django.core.management import call_command
from py_vapid import Vapid

from notices_app.core.vapid import b64url, public_key_text


@dataclass
class Received:
    path: str
    headers: dict
    body: bytes

    def json(self):
        return json.loads(self.body)


@dataclass
class FakeEndpoint:
    """Records every POST; answers with the queued (status, headers, body) replies in turn,
    then 201. `host` is what OUTBOUND_URL_ALLOWLIST must name to let the server send here."""

    replies: list = field(default_factory=list)
    received: list = field(default_factory=list)

    def __post_init__(self):
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                fake.received.append(Received(self.path, dict(self.headers), body))
                status, headers, reply = fake.replies.pop(0) if fake.replies else (201, {}, b"")
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.host = f"127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def url(self, path: str = "/") -> str:
        return f"http://{self.host}{path}"

    def close(self):
        self.server.shutdown()
        self.server.server_close()


class PushBrowser:
    """What a browser keeps for one push subscription: its ECDH key pair and auth secret."""

    def __init__(self, endpoint: str):
        self.private_key = ec.generate_private_key(ec.SECP256R1())
        self.auth_secret = os.urandom(16)
        self.endpoint = endpoint

    def to_json(self) -> dict:
        """`PushSubscription.toJSON()` as the page posts it."""
        return {
            "endpoint": self.endpoint,
            "keys": {"p256dh": public_key_text(self.private_key), "auth": b64url(self.auth_secret)},
        }

    def decrypt(self, body: bytes) -> dict:
        return json.loads(
            http_ece.decrypt(
                body,
                private_key=self.private_key,
                auth_secret=self.auth_secret,
                version="aes128gcm",
            )
        )


def vapid_signer_of(authorization: str) -> str | None:
    """The public key that signed a `vapid t=…,k=…` header (RFC 8292), None if it does not
    verify."""
    if not Vapid.verify(authorization):
        return None
    return dict(part.split("=", 1) for part in authorization.split(" ", 1)[1].split(","))["k"]


@pytest.fixture
def fake():
    """A factory of fake endpoints, each closed after the test."""
    made = []

    def make(*replies) -> FakeEndpoint:
        endpoint = FakeEndpoint(replies=list(replies))
        made.append(endpoint)
        return endpoint

    yield make
    for endpoint in made:
        endpoint.close()


@pytest.fixture
def vapid(settings, capsys):
    """Web Push configured with a key pair made by `manage.py make_vapid_keys`."""
    call_command("make_vapid_keys", "--subject", "mailto:ops@example.com")
    lines = dict(line.split("=", 1) for line in capsys.readouterr().out.split())
    settings.VAPID_PUBLIC_KEY = lines["VAPID_PUBLIC_KEY"]
    settings.VAPID_PRIVATE_KEY = lines["VAPID_PRIVATE_KEY"]
    settings.VAPID_SUBJECT = lines["VAPID_SUBJECT"]
    settings.NOTIFY_RETRY_BASE_SEC = 0.05
    return lines


def allow(settings, *endpoints: FakeEndpoint) -> None:
    """Widen OUTBOUND_URL_ALLOWLIST to the fakes, plain http on loopback: each named with its
    port (a host named so may be private) and OUTBOUND_ALLOW_HTTP on."""
    settings.OUTBOUND_ALLOW_HTTP = True
    settings.OUTBOUND_URL_ALLOWLIST = [*settings.OUTBOUND_URL_ALLOWLIST] + [
        endpoint.host for endpoint in endpoints
    ]
