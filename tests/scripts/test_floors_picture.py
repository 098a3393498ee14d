"""docs/architecture.md's floors picture is drawn from pyproject.toml's contracts and the
folders; the check fails as soon as a module moves and the picture does not follow."""

import shutil
import subprocess
import sys

import pytest

from tests.helpers import REPO

SCRIPT = REPO / "scripts" / "floors_picture.py"
APPS = ("sessions_app", "memory_app", "notices_app", "accounts_app")


def check(root) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(SCRIPT), "--check", "--root", str(root)],
        capture_output=True,
        text=True,
    )


@pytest.fixture
def house(tmp_path):
    """The repository's module tree (empty files), its contracts and its architecture.md."""
    for app in APPS:
        for source in (REPO / app).rglob("*.py"):
            target = tmp_path / source.relative_to(REPO)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.touch()
    (tmp_path / "docs").mkdir()
    shutil.copy(REPO / "docs" / "architecture.md", tmp_path / "docs")
    shutil.copy(REPO / "pyproject.toml", tmp_path)
    return tmp_path


def test_the_committed_picture_matches_the_code():
    result = check(REPO)
    assert result.returncode == 0, result.stderr


def test_a_module_added_or_moved_without_the_picture_fails_the_check(house):
    assert check(house).returncode == 0
    (house / "sessions_app" / "services" / "newcomer.py").touch()
    result = check(house)
    assert result.returncode == 1
    assert "floors_picture.py --write" in result.stderr

    (house / "sessions_app" / "services" / "newcomer.py").unlink()
    assert check(house).returncode == 0
    (house / "sessions_app" / "core" / "ids.py").rename(house / "sessions_app" / "store" / "ids.py")
    assert check(house).returncode == 1


def test_write_redraws_the_picture_so_the_check_passes_again(house):
    (house / "sessions_app" / "selectors" / "goals.py").touch()
    assert check(house).returncode == 1
    subprocess.run([sys.executable, str(SCRIPT), "--write", "--root", str(house)], check=True)
    assert check(house).returncode == 0
    assert "goals" in (house / "docs" / "architecture.md").read_text()
