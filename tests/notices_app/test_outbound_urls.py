"""Which URLs the server sends to (docs/design.md §16, §27): OUTBOUND_URL_ALLOWLIST, https
only unless OUTBOUND_ALLOW_HTTP, one parse (httpx's, the sender's), and the address a name
resolves to checked at send time."""

import httpx
import pytest
from django.core.exceptions import ImproperlyConfigured

from jarvis_site.shared.outbound_urls import (
    OutboundTarget,
    OutboundUrlRefused,
    allowed_hosts,
    outbound_address,
    outbound_target,
    outbound_url_check,
)


@pytest.mark.parametrize(
    "url",
    [
        "https://fcm.googleapis.com/fcm/send/abc",
        "https://updates.push.services.mozilla.com/wpush/v2/abc",
        "https://wns2-par02p.notify.windows.com/w/?token=abc",
        "https://api.push.apple.com/3/device/abc",
        "https://web.push.apple.com/QGx",
        "https://discord.com/api/webhooks/1/token",
        "https://discordapp.com:443/api/webhooks/1/token",
    ],
)
def test_the_default_list_allows_the_push_services_and_discord(url):
    assert outbound_url_check(url) == url


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:8000/admin/",
        "http://localhost/",
        "http://169.254.169.254/latest/meta-data/",
        "https://discord.com.evil.example/api/webhooks/1",
        "https://evildiscord.com/api/webhooks/1",
        "https://notify.windows.com/",  # *. is for subdomains only
        "https://discord.com:8443/api/webhooks/1",  # no port named: the default port only
        "https://user:pw@discord.com/api/webhooks/1",
        "ftp://discord.com/",
        "discord.com/api/webhooks/1",
        "",
    ],
)
def test_everything_else_is_refused(url):
    with pytest.raises(OutboundUrlRefused):
        outbound_url_check(url)


def test_an_entry_with_a_port_allows_that_port_only(settings):
    settings.OUTBOUND_URL_ALLOWLIST = ["push.internal:8443", "*.example.org"]
    assert outbound_url_check("https://push.internal:8443/x")
    assert outbound_url_check("https://a.b.example.org/x")
    for url in ["https://push.internal/x", "https://example.org/x"]:
        with pytest.raises(OutboundUrlRefused):
            outbound_url_check(url)


def test_a_malformed_entry_is_a_configuration_error(settings):
    settings.OUTBOUND_URL_ALLOWLIST = ["https://discord.com/"]
    with pytest.raises(ImproperlyConfigured):
        allowed_hosts()


@pytest.mark.parametrize(
    "entry",
    [
        "a." * (512 * 1024) + "!",
        "a-" * (512 * 1024) + ":123456",
        "*." + "a.b" * (350 * 1024) + "..",
    ],
    ids=["dotted-then-bang", "dashed-then-long-port", "star-then-double-dot"],
)
def test_a_megabyte_entry_that_is_not_a_host_is_refused_in_one_pass(settings, entry):
    """The entry's pattern is possessive: a megabyte that fails at its last character is
    refused without backtracking over its labels (the suite's timeout would catch one that
    did)."""
    settings.OUTBOUND_URL_ALLOWLIST = [entry]
    with pytest.raises(ImproperlyConfigured):
        allowed_hosts()


def test_http_is_refused_unless_the_operator_allows_it(settings):
    url = "http://discord.com/api/webhooks/1/token"
    with pytest.raises(OutboundUrlRefused, match="OUTBOUND_ALLOW_HTTP"):
        outbound_url_check(url)
    settings.OUTBOUND_ALLOW_HTTP = True
    assert outbound_url_check(url) == url


@pytest.mark.parametrize(
    "url",
    [
        "https://discord.com/api/webhooks/1/token\t",
        "https://discord.com/api/webhooks/1/token\r\nX-Injected: 1",
        "https://discord.com/api/webhooks/1/to ken",
        "https://disc\nord.com/api/webhooks/1",
        "https://discord.com\x00/api/webhooks/1",
        "https://discord.com/api/webhooks/1\x7f",
    ],
)
def test_whitespace_and_control_characters_are_refused(url):
    with pytest.raises(OutboundUrlRefused, match="control characters"):
        outbound_url_check(url)


@pytest.mark.parametrize(
    "url",
    [
        # A WHATWG parser reads the backslash as a slash (host evil.com); urlsplit read the
        # whole as a subdomain of push.apple.com and let it through.
        "https://evil.com\\.push.apple.com/x",
        "https://discord.com\\@evil.com/api/webhooks/1",
    ],
)
def test_a_backslash_is_refused_rather_than_read_one_way_or_the_other(url):
    with pytest.raises(OutboundUrlRefused, match="backslash"):
        outbound_url_check(url)


def test_the_sender_gets_the_checks_own_parse():
    target = outbound_target("https://a.b.push.apple.com/x?y=1")
    assert (target.host, target.port, target.inside) == ("a.b.push.apple.com", 443, False)
    assert str(target.url) == "https://a.b.push.apple.com/x?y=1"


@pytest.mark.parametrize(
    "host",
    ["127.0.0.1", "127.1", "10.1.2.3", "169.254.169.254", "192.168.0.1", "100.64.0.1", "0.0.0.0"],
)
def test_an_address_inside_a_private_network_is_refused_at_send_time(settings, host):
    settings.OUTBOUND_URL_ALLOWLIST = [host]
    target = outbound_target(f"https://{host}/x")  # on the list: accepted when given
    with pytest.raises(OutboundUrlRefused, match="private network"):
        outbound_address(target)


def test_a_name_resolving_to_loopback_is_refused_at_send_time(settings):
    settings.OUTBOUND_URL_ALLOWLIST = ["localhost"]
    with pytest.raises(OutboundUrlRefused, match="localhost resolves to"):
        outbound_address(outbound_target("https://localhost/x"))


def test_a_host_named_with_its_port_may_be_private(settings):
    settings.OUTBOUND_URL_ALLOWLIST = ["localhost:8443", "*.localhost:8443"]
    target = outbound_target("https://localhost:8443/x")
    assert target.inside
    assert outbound_address(target) in {"127.0.0.1", "::1"}
    # A wildcard entry names no host: the address is checked.
    assert not outbound_target("https://a.localhost:8443/x").inside


def test_a_public_address_is_sent_to_as_resolved(settings):
    settings.OUTBOUND_URL_ALLOWLIST = ["93.184.215.14"]
    assert outbound_address(outbound_target("https://93.184.215.14/x")) == "93.184.215.14"


@pytest.mark.parametrize("host", ["::1", "::ffff:127.0.0.1", "fe80::1", "fc00::1"])
def test_private_ipv6_addresses_are_refused_too(host):
    target = OutboundTarget(url=httpx.URL(f"https://[{host}]/x"), host=host, port=443, inside=False)
    with pytest.raises(OutboundUrlRefused, match="private network"):
        outbound_address(target)
