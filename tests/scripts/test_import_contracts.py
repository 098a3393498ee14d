"""The floors of pyproject.toml's contracts hold, and a module that imports upward breaks them.

`lint-imports` runs in CI over the real tree; this test runs it over a copy of the apps with
one scratch module added, so a contract that stopped naming a floor (and so no longer guards
it) fails here rather than passing silently."""

import shutil
import subprocess

import pytest

from tests.helpers import REPO

LINT_IMPORTS = REPO / ".venv" / "bin" / "lint-imports"
APPS = ("sessions_app", "memory_app", "notices_app", "accounts_app", "jarvis_site")


@pytest.fixture
def house(tmp_path):
    """The apps' sources and the contracts, copied, so a scratch module changes nothing real."""
    for app in APPS:
        shutil.copytree(
            REPO / app,
            tmp_path / app,
            ignore=shutil.ignore_patterns("__pycache__", "static"),
        )
    shutil.copy(REPO / "pyproject.toml", tmp_path)
    return tmp_path


def lint_imports(root) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-logo", "--no-cache"],
        cwd=root,
        env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
    )


@pytest.mark.parametrize(
    ("room", "upward"),
    [
        # The event-loop plumbing knows nothing of turns.
        ("sessions_app/runtime/loop", "sessions_app.runtime.turn.turns"),
        # The sandbox and MCP are below the turn, beside each other.
        ("sessions_app/runtime/sandbox", "sessions_app.runtime.turn.agents"),
        ("sessions_app/runtime/mcp", "sessions_app.runtime.sandbox.workspace"),
        # A tool never reaches up into the live bus.
        ("sessions_app/runtime/tools", "sessions_app.runtime.live.live_bus"),
    ],
)
def test_a_scratch_upward_import_breaks_the_runtime_floors(house, room, upward):
    assert lint_imports(house).returncode == 0
    (house / room / "scratch_upward.py").write_text(f"import {upward}  # noqa: F401\n")
    result = lint_imports(house)
    assert result.returncode != 0
    assert "sessions_app floors" in result.stdout
    assert "scratch_upward" in result.stdout
