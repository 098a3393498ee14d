"""Fixtures of the browser tests: a real Chromium, a real Daphne (offline or scripted model).
The user who signs in is the shared `alice`."""

import pytest

from tests.browser.helpers import CHROMIUM, LAUNCH_ARGS, TIMEOUT_MS
from tests.fakes.llm_server import FakeLLMServer
from tests.fakes.mcp_servers import servers_file, stdio_table
from tests.multiprocess.servers import daphne

# The servers a browser test may ask for, by fixture name.
SERVER_FIXTURES = ("offline_server", "model_server", "mcp_offline_server")


@pytest.fixture
def browser(alice, monkeypatch, request):
    """Chromium. It depends on `alice` so the user is created before Playwright's event loop is
    set on this thread (ORM calls made after that get a connection nothing closes).

    The test's server starts before the browser, so that it stops after it: a server asked
    to stop while the browser's sockets were still open took up to a minute to exit."""
    for name in SERVER_FIXTURES:
        if name in request.fixturenames:
            request.getfixturevalue(name)
    from playwright.sync_api import expect, sync_playwright

    # Playwright's sync API keeps an event loop on this thread; the server helper's own
    # database check at shutdown is plain synchronous code and safe here.
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    # `expect` waits 5 s by default, too little for a loaded machine to be sure of.
    expect.set_options(timeout=TIMEOUT_MS)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=LAUNCH_ARGS)
        try:
            yield browser
        finally:
            browser.close()


@pytest.fixture
def offline_server(alice):
    """The app with its default offline model."""
    with daphne() as base:
        yield base


@pytest.fixture
def mcp_offline_server(alice, tmp_path):
    """The offline model with the fake MCP server (tests/fakes/mcp_server.py) over stdio as
    `fake`: `red_square` trusted, every other tool asks first."""
    directory = tmp_path / "mcp"
    directory.mkdir()
    servers = servers_file(
        tmp_path / "mcp.toml", fake=stdio_table(directory, trusted_tools=["red_square"])
    )
    with daphne(MCP_SERVERS_FILE=str(servers)) as base:
        yield base


@pytest.fixture
def model():
    """A scripted OpenAI-compatible model: answers with whatever markdown a test needs."""
    with FakeLLMServer() as server:
        yield server


@pytest.fixture
def model_server(alice, model):
    """The app talking to the scripted model through the official OpenAI SDK."""
    with daphne(
        JARVIS_MODEL="openai:gpt-4o-mini",
        OPENAI_BASE_URL=model.openai_url,
        OPENAI_API_KEY="test",
    ) as base:
        yield base
