"""Build the sandbox's own Python (docs/design.md §28): `manage.py sandbox_setup`.

A virtualenv at var/sandbox/venv from `sandbox/requirements.txt` (numpy, pandas, matplotlib,
Pillow), made from the system's Python (under /usr, which the sandbox sees read-only
anyway), with bytecode compiled and matplotlib's font list built, so that a run imports
them without writing anything. Cached: nothing is done while the requirements and the base
Python are those it was built from. Where SANDBOX_PYTHON names another Python, there is
nothing to build. `make run` and `make test` call it; several callers at once wait for the
first one's build (a file lock) and then find it done.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

REQUIREMENTS = Path(settings.BASE_DIR) / "sandbox" / "requirements.txt"
STAMP = ".jarvis-requirements"
# The system's Python first: the sandbox shows /usr already. Another one (pyenv's, under a
# home directory) would have to be shown to the sandbox as well.
BASE_PYTHONS = ("/usr/bin/python3", "/usr/local/bin/python3")


def default_venv() -> Path:
    return Path(settings.VAR_DIR) / "sandbox" / "venv"


def _uv() -> str | None:
    beside = Path(sys.executable).parent / "uv"
    return str(beside) if beside.is_file() else shutil.which("uv")


class Command(BaseCommand):
    help = "Build the sandbox's Python virtualenv from sandbox/requirements.txt (cached)."

    def add_arguments(self, parser):
        parser.add_argument("--python", help="the Python the virtualenv is made from")
        parser.add_argument("--force", action="store_true", help="build even when up to date")

    def handle(self, *args, **options):
        venv = default_venv()
        if Path(settings.SANDBOX_PYTHON) != venv / "bin" / "python":
            if not os.access(settings.SANDBOX_PYTHON, os.X_OK):
                raise CommandError(f"SANDBOX_PYTHON ({settings.SANDBOX_PYTHON}) is not a program")
            self.stdout.write(f"SANDBOX_PYTHON is {settings.SANDBOX_PYTHON}: nothing to build")
            return
        base = options["python"] or next(
            (path for path in BASE_PYTHONS if os.access(path, os.X_OK)), sys._base_executable
        )
        wanted = hashlib.sha256(REQUIREMENTS.read_bytes() + base.encode()).hexdigest()
        venv.parent.mkdir(parents=True, exist_ok=True)
        with open(venv.parent / ".lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            stamp = venv / STAMP
            if (
                not options["force"]
                and stamp.is_file()
                and stamp.read_text() == wanted
                and (venv / "bin" / "python").exists()
            ):
                self.stdout.write(f"the sandbox's Python is up to date ({venv})")
                return
            self._build(venv, base)
            stamp.write_text(wanted)
        self.stdout.write(self.style.SUCCESS(f"built the sandbox's Python in {venv}"))

    def _build(self, venv: Path, base: str) -> None:
        shutil.rmtree(venv, ignore_errors=True)
        uv = _uv()
        python = str(venv / "bin" / "python")
        if uv:
            self._run([uv, "venv", "--quiet", "--python", base, str(venv)])
            self._run(
                [uv, "pip", "install", "--quiet", "--compile-bytecode", "--python", python]
                + ["-r", str(REQUIREMENTS)]
            )
        else:
            self._run([base, "-m", "venv", str(venv)])
            self._run([python, "-m", "pip", "install", "--quiet", "-r", str(REQUIREMENTS)])
            self._run([python, "-m", "compileall", "-q", str(venv)])
        # matplotlib's font list, built once here: each run would otherwise build it again.
        config = venv / "mplconfig"
        config.mkdir()
        environment = {"MPLCONFIGDIR": str(config), "MPLBACKEND": "Agg", "PATH": "/usr/bin:/bin"}
        self._run([python, "-c", "import matplotlib.font_manager"], env=environment)

    def _run(self, command: list[str], env: dict | None = None) -> None:
        try:
            subprocess.run(command, check=True, env=env, capture_output=True, text=True)
        except subprocess.CalledProcessError as error:
            raise CommandError(
                f"{' '.join(command[:3])} … failed: {error.stderr.strip()[-2000:]}"
            ) from error
