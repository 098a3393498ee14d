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
