"""MCP_SERVERS_FILE's checks, the names tools are offered under, and §27's outbound rules for
HTTP servers (docs/design.md §31)."""

import re

import pytest
from django.core.exceptions import ImproperlyConfigured

from sessions_app.runtime.mcp.config import servers_parse
from sessions_app.runtime.mcp.names import offered_names, server_of
from sessions_app.runtime.mcp.offer import mcp_close_all
from tests.fakes.mcp_servers import http_server, http_table, servers_file

PROVIDER_NAME = re.compile(r"[a-zA-Z0-9_-]{1,64}")


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("[servers.x]\ncommand = 'a'\n", "servers.x.transport must be one of http, stdio"),
        ("[servers.x]\ntransport = 'stdio'\n", "servers.x.command is required for stdio"),
        ("[servers.a__b]\ntransport = 'stdio'\ncommand = 'a'\n", "a server's name is"),
        ("[servers.x]\ntransport = 'stdio'\ncommand = 'a'\ncolour = 1\n", "unknown key(s) colour"),
        ("[servers.x]\ntransport = 'stdio'\ncommand = 'a'\ntimeout_sec = 0\n", "timeout_sec"),
        ("[servers.x]\ntransport = 'stdio'\ncommand = 'a'\nargs = [1]\n", "list of strings"),
        ("[servers.x]\ntransport = 'http'\nurl = 'http://mcp.example.com/'\n", "https://"),
        ("[servers.x]\ntransport = 'http'\nurl = 'https://u:p@mcp.example.com/'\n", "password"),
        ("[servers.x\n", "not TOML"),
    ],
)
def test_a_mistake_in_the_file_is_named(text, says):
    with pytest.raises(ImproperlyConfigured, match=re.escape(says)):
        servers_parse(text)


def test_offered_names_keep_to_the_providers_rule_and_stay_distinct():
    tools = ["add", "find.notes", "find_notes", "x" * 90, "ünïcode tool", "find/notes"]
    offered = offered_names("notes", tools)
    assert sorted(offered.values()) == sorted(tools)
    assert all(PROVIDER_NAME.fullmatch(name) for name in offered)
    assert offered_names("notes", tools) == offered  # the same every time
    assert "mcp__notes__add" in offered and "mcp__notes__find_notes" in offered
    assert {server_of(name) for name in offered} == {"notes"}
    assert server_of("calculator") is None


@pytest.mark.django_db
def test_an_http_server_on_a_private_address_is_refused_unless_allowlisted_with_its_port(
    tmp_path, settings, api
):
    directory = tmp_path / "mcp"
    directory.mkdir()
    settings.OUTBOUND_ALLOW_HTTP = True
    settings.OUTBOUND_URL_ALLOWLIST = []
    with http_server(directory) as server:
        settings.MCP_SERVERS_FILE = str(
            servers_file(tmp_path / "m.toml", web=http_table(server.url))
        )
        try:
            body = api.get("/api/tools/").json()
        finally:
            mcp_close_all()
        [web] = body["servers"]
        assert not web["listed"]
        assert "127.0.0.1, an address inside a private network" in web["error"]
        assert not [tool for tool in body["tools"] if tool["source"] == "mcp"]

        settings.OUTBOUND_URL_ALLOWLIST = [f"127.0.0.1:{server.port}"]
        settings.MCP_SERVERS_FILE = str(
            servers_file(tmp_path / "n.toml", web=http_table(server.url))
        )
        try:
            body = api.get("/api/tools/").json()
        finally:
            mcp_close_all()
        assert body["servers"][0]["listed"]
        assert "mcp__web__add" in {tool["name"] for tool in body["tools"]}
