import pytest

from sessions_app.runtime.mcp.offer import mcp_close_all
from sessions_app.store import get_store
from tests.fakes.mcp_servers import http_server, http_table, servers_file, stdio_table


@pytest.fixture
def mcp_dir(tmp_path):
    directory = tmp_path / "mcp"
    directory.mkdir()
    return directory


@pytest.fixture(params=["stdio", "http"])
def transport(request):
    return request.param


@pytest.fixture
def serve_mcp(transport, mcp_dir, tmp_path, settings):
    """`serve_mcp(**table)`: the fake server as `fake` in MCP_SERVERS_FILE, over the test's
    transport; returns the running HTTP server (None over stdio)."""
    running = []

    def serve(**table):
        if transport == "stdio":
            config = stdio_table(mcp_dir, **table)
            server = None
        else:
            server = http_server(mcp_dir, **table.pop("env", {}))
            running.append(server)
            server = server.__enter__()
            settings.OUTBOUND_ALLOW_HTTP = True
            settings.OUTBOUND_URL_ALLOWLIST = [f"127.0.0.1:{server.port}"]
            config = http_table(server.url, **table)
        settings.MCP_SERVERS_FILE = str(
            servers_file(tmp_path / f"mcp-{len(running)}-{transport}.toml", fake=config)
        )
        return server

    yield serve
    mcp_close_all()
    for server in running:
        server.__exit__(None, None, None)


@pytest.fixture
def session(backend, alice):
    return get_store().create("mcp", owner_id=alice.id, agent="jarvis").id
