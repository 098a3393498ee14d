"""The race experiment runs as documented, and with the lock nothing comes out inconsistent."""

import subprocess
import sys

from tests.helpers import REPO


def test_with_the_lock_no_round_is_inconsistent(tmp_path):
    completed = subprocess.run(
        [
            sys.executable,
            "scripts/experiments/session_race.py",
            "--label",
            "smoke",
            "--rounds",
            "40",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr
    row = completed.stdout.strip().splitlines()[-1]
    cells = [cell.strip() for cell in row.strip("|").split("|")]
    label, lock, _processes, database, rounds, deleted, kept, without_history, bad, share = cells
    assert (label, lock, database, rounds) == ("smoke", "on", "sqlite", "40")
    assert int(deleted) + int(kept) == 40
    assert (without_history, bad, share) == ("0", "0", "0.0%")


def race(*options: str) -> str:
    completed = subprocess.run(
        [sys.executable, "scripts/experiments/session_race.py", "--label", "same", *options],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr
    return completed.stdout


def test_the_same_seed_interleaves_the_same_way_again_and_another_seed_does_not():
    """The scheduler, not the operating system, decides the interleaving: two runs with one
    seed print the same schedule digest and the same outcomes; another seed, another schedule.
    Without the lock the outcomes differ from round to round, so equal tables mean something."""
    first = race("--rounds", "30", "--seed", "11", "--no-lock")
    again = race("--rounds", "30", "--seed", "11", "--no-lock")
    other = race("--rounds", "30", "--seed", "12", "--no-lock")
    assert "schedule digest" in first
    assert first == again
    digest = [line for line in first.splitlines() if line.startswith("schedule digest")]
    assert digest and digest[0] not in other
