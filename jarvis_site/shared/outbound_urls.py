"""Which URLs the server may send to (docs/design.md §16, §27).

A push endpoint or a Discord webhook URL is a request the server makes on the user's behalf:
without a check, any user could make it POST into the server's own network. So:

- a URL is parsed once, by httpx — the client that sends — and the sender is handed that
  parse (`OutboundTarget`), never the text again: a check and a sender that read one URL
  differently (a backslash, a tab inside the host) cannot disagree about where it goes;
  whitespace, control characters and backslashes are refused outright;
- `https://` only, unless OUTBOUND_ALLOW_HTTP (local fakes, tests);
- a user's URL must name a host in OUTBOUND_URL_ALLOWLIST — when the user gives it and again
  before each send, since the list may have shrunk since (the operator's NOTIFY_WEBHOOK_URL
  is the operator's own choice and skips this one rule);
- at send time the host is resolved once, every address it resolves to must be public
  (not private, loopback, link-local, reserved…), and the request goes to that very address
  (`outbound_address`): a name that answered a public address to the check and a private
  one to the connection (DNS rebinding) never reaches the private one. A host written on the
  allowlist with a port (`push.internal:8443`) is the operator saying it lives inside: it may
  resolve to a private address.

No channel follows a redirect.
"""

from __future__ import annotations

import ipaddress
import re
import socket
from dataclasses import dataclass

import httpx
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from jarvis_site.shared.errors import Code, DomainError

DEFAULT_PORTS = {"http": 80, "https": 443}
MAX_URL_CHARS = 2000
# Possessive runs: a label never gives characters back, so a long entry that does not match
# fails in one pass (docs/design.md §27: checks linear in their input).
_HOST_PATTERN = re.compile(r"(\*\.)?+([a-z0-9-]++(?:\.[a-z0-9-]++)*+)(?::(\d{1,5}))?+")
# Whitespace, C0 controls, DEL and the backslash: browsers and servers each read a host with
# one of these their own way, so a URL carrying one is refused rather than interpreted.
_UNSAFE_CHARS = frozenset([chr(code) for code in range(0x21)] + ["\x7f", "\\"])


class OutboundUrlRefused(DomainError, ValueError):
    """A URL the server will not send to (the API answers 400 `url_not_allowed`)."""

    code = Code.URL_NOT_ALLOWED


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


@dataclass(frozen=True)
class OutboundTarget:
    """A URL as the sender will use it: httpx's parse, its host in ASCII, its port, and
    whether the operator named that host and port on the allowlist (then it may be private)."""

    url: httpx.URL
    host: str
    port: int
    inside: bool


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


def outbound_target(url: str, *, allowlisted: bool = True) -> OutboundTarget:
    """`url` parsed for sending when the server may send to it; else OutboundUrlRefused
    saying why. `allowlisted=False` (the operator's own webhook) skips the host list only."""
    if not isinstance(url, str) or not url or len(url) > MAX_URL_CHARS:
        raise OutboundUrlRefused(f"a URL is 1-{MAX_URL_CHARS} characters")
    if not _UNSAFE_CHARS.isdisjoint(url):
        raise OutboundUrlRefused(
            "the URL may not contain spaces, tabs, line breaks, control characters or a backslash"
        )
    try:
        parsed = httpx.URL(url)
    except httpx.InvalidURL as error:
        raise OutboundUrlRefused(f"not a URL: {error}") from error
    schemes = ("https", "http") if settings.OUTBOUND_ALLOW_HTTP else ("https",)
    if parsed.scheme not in schemes or not parsed.raw_host:
        raise OutboundUrlRefused(
            "the URL must be https:// with a host"
            + ("" if settings.OUTBOUND_ALLOW_HTTP else " (http:// only with OUTBOUND_ALLOW_HTTP)")
        )
    if parsed.userinfo:
        raise OutboundUrlRefused("the URL may not carry a user name or password")
    host = parsed.raw_host.decode("ascii").lower().rstrip(".")
    default_port = DEFAULT_PORTS[parsed.scheme]
    port = parsed.port or default_port
    entries = allowed_hosts()
    if allowlisted and not any(entry.matches(host, port, default_port) for entry in entries):
        raise OutboundUrlRefused(
            f"{host} is not a host this server sends to (OUTBOUND_URL_ALLOWLIST)"
        )
    inside = any(
        entry.port is not None and not entry.subdomains and entry.matches(host, port, default_port)
        for entry in entries
    )
    return OutboundTarget(url=parsed, host=host, port=port, inside=inside)


def outbound_url_check(url: str) -> str:
    """`url` when the server may send to it (a user's URL, before it is stored)."""
    outbound_target(url)
    return url


def outbound_address(target: OutboundTarget) -> str:
    """The address to connect to for `target`: its host resolved now, once. OutboundUrlRefused
    when any address it resolves to is not public, unless the operator named it with a port
    on the allowlist; OSError when it does not resolve (worth another try later)."""
    infos = socket.getaddrinfo(target.host, target.port, type=socket.SOCK_STREAM)
    addresses = [ipaddress.ip_address(info[4][0].split("%", 1)[0]) for info in infos]
    if not target.inside:
        for address in addresses:
            # ::ffff:127.0.0.1 is 127.0.0.1 to the kernel.
            plain = getattr(address, "ipv4_mapped", None) or address
            if not plain.is_global or plain.is_multicast:
                raise OutboundUrlRefused(
                    f"{target.host} resolves to {address}, an address inside a private network"
                    " (name it with its port on OUTBOUND_URL_ALLOWLIST to send there)"
                )
    return str(addresses[0])
