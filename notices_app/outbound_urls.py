"""Which URLs a user may make the server send to (docs/design.md §16).

A push endpoint or a Discord webhook URL is a request the server makes on the user's behalf:
without a check, any user could make it POST into the server's own network. Only hosts in
OUTBOUND_URL_ALLOWLIST are accepted — when the user gives the URL, and again before each
send, since the list may have shrunk since — and no channel follows a redirect.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import urlsplit

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

DEFAULT_PORTS = {"http": 80, "https": 443}
MAX_URL_CHARS = 2000
_HOST_PATTERN = re.compile(r"(\*\.)?([a-z0-9-]+(?:\.[a-z0-9-]+)*)(?::(\d{1,5}))?")


class OutboundUrlRefused(ValueError):
    """A URL the server will not send to (the API answers 400 `url_not_allowed`)."""


@dataclass(frozen=True)
class AllowedHost:
    host: str
    subdomains: bool
    port: int | None

    def matches(self, host: str, port: int, default_port: int) -> bool:
        if self.port is None and port != default_port:
            return False
        if self.port is not None and port != self.port:
            return False
        if self.subdomains:
            return host.endswith("." + self.host)
        return host == self.host


def allowed_hosts() -> list[AllowedHost]:
    """OUTBOUND_URL_ALLOWLIST parsed; a malformed entry is ImproperlyConfigured."""
    hosts = []
    for entry in settings.OUTBOUND_URL_ALLOWLIST:
        if not entry.strip():  # "a.com,,b.com" or an empty list written as ""
            continue
        match = _HOST_PATTERN.fullmatch(entry.strip().lower())
        if match is None:
            raise ImproperlyConfigured(
                f"OUTBOUND_URL_ALLOWLIST: {entry!r} is not host, *.domain or either with :port"
            )
        star, host, port = match.groups()
        hosts.append(AllowedHost(host, bool(star), int(port) if port else None))
    return hosts


def outbound_url_check(url: str) -> str:
    """`url` when the server may send to it; else OutboundUrlRefused saying why."""
    if not isinstance(url, str) or not url or len(url) > MAX_URL_CHARS:
        raise OutboundUrlRefused(f"a URL is 1-{MAX_URL_CHARS} characters")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as error:
        raise OutboundUrlRefused(f"not a URL: {error}") from error
    if parts.scheme not in DEFAULT_PORTS or not parts.hostname:
        raise OutboundUrlRefused("the URL must be http:// or https:// with a host")
    if parts.username is not None or parts.password is not None:
        raise OutboundUrlRefused("the URL may not carry a user name or password")
    host = parts.hostname.rstrip(".")
    default_port = DEFAULT_PORTS[parts.scheme]
    if not any(
        allowed.matches(host, port or default_port, default_port) for allowed in allowed_hosts()
    ):
        raise OutboundUrlRefused(
            f"{host} is not a host this server sends to (OUTBOUND_URL_ALLOWLIST)"
        )
    return url
