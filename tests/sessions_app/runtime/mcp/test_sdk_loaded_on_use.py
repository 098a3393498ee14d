"""A worker with no MCP server configured starts without the MCP SDK, which was half of every
worker's and every management command's start-up time; the first server used loads it."""

import subprocess
import sys

from tests.helpers import REPO

LOADED = "import sys; print(sorted(m for m in ('mcp', 'mcp_types') if m in sys.modules))"


def modules_after(script: str, **env) -> str:
    completed = subprocess.run(
        [sys.executable, "-c", f"import django; django.setup(); {script}; {LOADED}"],
        cwd=REPO,
        env={"PATH": "/usr/bin:/bin", "DJANGO_SETTINGS_MODULE": "jarvis_site.settings", **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr
    return completed.stdout.strip().splitlines()[-1]


def test_start_up_and_a_turns_tool_list_leave_the_sdk_unloaded():
    script = (
        "from sessions_app.runtime.mcp.offer import mcp_tools, mcp_servers_status; "
        "assert mcp_tools() == {} and mcp_servers_status() == []"
    )
    assert modules_after(script) == "[]"


def test_the_first_server_used_loads_it(tmp_path):
    servers = tmp_path / "mcp.toml"
    servers.write_text('[servers.echo]\ntransport = "stdio"\ncommand = "/bin/true"\n')
    script = (
        "from sessions_app.runtime.mcp.offer import _connection; "
        "from sessions_app.runtime.mcp.config import mcp_servers; "
        "_connection(mcp_servers()['echo'])"
    )
    assert modules_after(script, MCP_SERVERS_FILE=str(servers)) == "['mcp', 'mcp_types']"
