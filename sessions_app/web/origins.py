"""Which web pages may open a WebSocket: the site's own origin, or a trusted one.

A browser sends its signed-in user's cookie with a WebSocket handshake to any page that asks,
so the handshake's Origin header is the only thing that tells the chat page from a page on
another site — or on another port of the same host, which is another origin to the browser.
An origin is accepted when its scheme, host and port are:

- the page's own: the handshake's Host (a host in ALLOWED_HOSTS), with `ws` as `http` and
  `wss` as `https`; or
- one of CSRF_TRUSTED_ORIGINS (`https://*.example.com` allows the subdomains, as in
  Django's CSRF check).

A handshake without an Origin header comes from a program, not a browser (browsers always
send one), and cross-site request forgery needs a browser: it is let through, and the
consumer still requires a cookie session or a token. `Origin: null` (sandboxed frames,
files) is refused. A refused handshake is answered with HTTP 403.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from channels.security.websocket import WebsocketDenier
from django.conf import settings
from django.http.request import is_same_domain, split_domain_port, validate_host

DEFAULT_PORTS = {"http": 80, "https": 443}
PAGE_SCHEMES = {"ws": "http", "wss": "https"}

Origin = tuple[str, str, int]


def parse_origin(value: str) -> Origin | None:
    """(scheme, host, port) of an origin, default ports filled in; None when it is not one."""
    try:
        parts = urlsplit(value.strip())
        scheme = parts.scheme.lower()
        host = (parts.hostname or "").lower()
        port = parts.port or DEFAULT_PORTS.get(scheme)
    except ValueError:
        return None
    if scheme not in DEFAULT_PORTS or not host or port is None:
        return None
    if parts.path not in ("", "/") or parts.query or parts.fragment or parts.username:
        return None
    return scheme, host, port


def _header(scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", ()):
        if key == name:
            return value.decode("latin-1")
    return None


def own_origin(scope) -> Origin | None:
    """The origin of the page that serves this site at the handshake's Host, if allowed."""
    host = _header(scope, b"host")
    if not host:
        return None
    domain, _ = split_domain_port(host)
    if not domain or not validate_host(domain, settings.ALLOWED_HOSTS):
        return None
    page_scheme = PAGE_SCHEMES.get(scope.get("scheme", "ws"), "http")
    return parse_origin(f"{page_scheme}://{host}")


def is_trusted(origin: Origin) -> bool:
    scheme, host, port = origin
    for entry in settings.CSRF_TRUSTED_ORIGINS:
        if "://*." in entry:
            entry_scheme, _, rest = entry.partition("://*.")
            trusted = parse_origin(f"{entry_scheme}://{rest}")
            if (
                trusted is not None
                and trusted[0] == scheme
                and trusted[2] == port
                and is_same_domain(host, "." + trusted[1])
            ):
                return True
        elif parse_origin(entry) == origin:
            return True
    return False


def origin_allowed(scope) -> bool:
    value = _header(scope, b"origin")
    if value is None:
        return True
    origin = parse_origin(value)
    if origin is None:
        return False
    return origin == own_origin(scope) or is_trusted(origin)


class OriginCheck:
    """ASGI middleware for WebSocket routes: refuse handshakes from origins not allowed."""

    def __init__(self, application):
        self.application = application

    async def __call__(self, scope, receive, send):
        if origin_allowed(scope):
            return await self.application(scope, receive, send)
        return await WebsocketDenier()(scope, receive, send)
