"""OUTBOUND_URL_ALLOWLIST: which URLs a user may make the server send to (docs/design.md §16)."""

import pytest
from django.core.exceptions import ImproperlyConfigured

from notices_app.outbound_urls import OutboundUrlRefused, allowed_hosts, outbound_url_check


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
