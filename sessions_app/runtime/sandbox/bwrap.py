"""Runs on this machine under bubblewrap (Debian's `bubblewrap`), in namespaces of its own.

The program gets new user, PID, network, IPC and UTS namespaces (the network one only
without SANDBOX_NETWORK); it sees read-only system directories (`/usr` and its links), the
sandbox's Python read-only, `/workspace` (the run's scratch copy of the session's files,
the only writable place) and a private `/tmp`; no capabilities; it dies with the worker
(`--die-with-parent`). `prlimit` inside sets the limits that hold per process: CPU seconds,
address space, processes, file size, no core files. The wall clock, the output caps and a
Stop are this module's: each ends the run by killing the PID namespace's first process,
which takes every other process of the namespace with it before its parent sees it end —
so when `run` returns, nothing of the run is left.

A server running as root starts bwrap as SANDBOX_UID: the kernel does not count a root
user's processes against RLIMIT_NPROC, and a fork bomb would then meet no limit.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import stat
import tempfile
import time
from pathlib import Path

from django.conf import settings

from sessions_app.runtime.sandbox.base import (
    KILLED_MEMORY,
    KILLED_OUTPUT,
    KILLED_TIMEOUT,
    RunOutcome,
    RunSpec,
    SandboxBackend,
)

# Python code that hits its memory limit ends with this code (the boot script below), so
# the run reports `killed: "memory"` rather than a traceback the model must interpret.
MEMORY_EXIT_CODE = 86
# bwrap exits 128 + the signal that ended its program: CPU time over RLIMIT_CPU is SIGXCPU
# (and SIGKILL at the hard limit).
CPU_SIGNALS = {128 + signal.SIGXCPU, 128 + signal.SIGKILL}
# Output past the kept part is read and dropped; past this many times the cap the run is
# ended (`killed: "output"`): a program printing without end would otherwise run to its
# wall clock with a worker reading it.
OUTPUT_KILL_FACTOR = 16
READ_CHUNK = 65536
# After a kill, how long the namespace's teardown may take before the whole group is killed.
KILL_GRACE_SEC = 2.0
WORKSPACE = "/workspace"
CODE_DIR = "/sandbox"
MPL_DIR = "/tmp/matplotlib"
VENV = "/opt/python"
# System files a program's libraries read (the dynamic loader's cache, the time zone); each
# bound only where the host has it.
ETC_FILES = ("/etc/ld.so.cache", "/etc/localtime", "/etc/alternatives", "/etc/fonts")
NETWORK_ETC_FILES = ("/etc/resolv.conf", "/etc/hosts", "/etc/ssl", "/etc/ca-certificates")
TOP_LINKS = ("bin", "lib", "lib32", "lib64", "sbin")
BWRAP_ENVIRONMENT = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}
# The program's whole environment, with PATH (the sandbox's Python first).
SANDBOX_ENVIRONMENT = {
    "HOME": "/tmp",
    "LANG": "C.UTF-8",
    "MPLBACKEND": "Agg",
    "MPLCONFIGDIR": MPL_DIR,
    # One thread per numerical library: their pools reserve address space per thread,
    # which the memory limit counts.
    "OPENBLAS_NUM_THREADS": "1",
    "OMP_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
}

BOOT = f"""\
import os, sys
sys.argv = ["main.py"]
sys.path.insert(0, {WORKSPACE!r})
with open({CODE_DIR + "/main.py"!r}, encoding="utf-8") as source:
    code = compile(source.read(), "main.py", "exec")
try:
    exec(code, {{"__name__": "__main__", "__builtins__": __builtins__}})
except MemoryError:
    import traceback
    traceback.print_exc()
    sys.stderr.flush()
    os._exit({MEMORY_EXIT_CODE})
"""


def python_binds(python: str) -> tuple[str, list[tuple[str, str]]]:
    """(the program to run inside, [(host directory, where the sandbox sees it)]) for the
    sandbox's Python, all read-only. A virtualenv is shown at VENV whatever its host path
    (which would name the project's directory); the installation it was made from, when not
    under /usr already, at its own path (the virtualenv names it)."""
    executable = Path(python)
    venv = executable.parent.parent
    config = venv / "pyvenv.cfg"
    if not config.is_file():
        prefix = executable.resolve().parent.parent
        binds = [] if str(prefix).startswith("/usr") else [(str(prefix), str(prefix))]
        return python, binds
    binds = [(str(venv), VENV)]
    for line in config.read_text(encoding="utf-8").splitlines():
        key, _, value = line.partition("=")
        if key.strip() == "home":
            prefix = Path(value.strip()).resolve().parent
            if not str(prefix).startswith("/usr"):
                binds.append((str(prefix), str(prefix)))
    return f"{VENV}/bin/{executable.name}", binds


class SandboxFailed(RuntimeError):
    """The sandbox could not be set up (bwrap refused): the call's error, not a run's result."""


class BwrapBackend(SandboxBackend):
    name = "bwrap"

    def __init__(self, *, python: str | None = None, bwrap: str | None = None):
        self.python = python or settings.SANDBOX_PYTHON
        self.bwrap = bwrap or shutil.which("bwrap") or ""

    def unavailable(self) -> str | None:
        if not self.bwrap:
            return "bubblewrap is not installed (Debian: apt-get install bubblewrap)"
        if not os.access(self.python, os.X_OK):
            return f"the sandbox's Python is missing ({self.python}): run manage.py sandbox_setup"
        return None

    def command(self, spec: RunSpec, info_fd: int) -> list[str]:
        limits = spec.limits
        args = [
            self.bwrap,
            "--unshare-user",
            "--unshare-pid",
            "--unshare-ipc",
            "--unshare-uts",
            "--unshare-cgroup-try",
            "--hostname",
            "sandbox",
            "--die-with-parent",
            "--new-session",
            "--cap-drop",
            "ALL",
            "--ro-bind",
            "/usr",
            "/usr",
        ]
        if not limits.network:
            args.append("--unshare-net")
        for name in TOP_LINKS:
            host = Path("/") / name
            if host.is_symlink():
                args += ["--symlink", os.readlink(host), f"/{name}"]
            elif host.is_dir():
                args += ["--ro-bind", str(host), f"/{name}"]
        for path in ETC_FILES + (NETWORK_ETC_FILES if limits.network else ()):
            args += ["--ro-bind-try", path, path]
        args += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--dir", MPL_DIR]
        python, binds = python_binds(self.python)
        for host_dir, inside in binds:
            args += ["--ro-bind", host_dir, inside]
        # The font list sandbox_setup built: matplotlib finds it instead of building it
        # again on every run (seconds). Its directory stays writable for the rest.
        cache = Path(self.python).parent.parent / "mplconfig"
        if cache.is_dir():
            for file in cache.glob("fontlist-*.json"):
                args += ["--ro-bind", str(file), f"{MPL_DIR}/{file.name}"]
        args += ["--bind", str(spec.workspace), WORKSPACE]
        if spec.attachments is not None:
            args += ["--ro-bind", str(spec.attachments), f"{WORKSPACE}/attachments"]
        args += ["--ro-bind", str(spec.workspace.parent / "code"), CODE_DIR]
        # Everything is in place: the root itself becomes read-only too.
        args += ["--remount-ro", "/", "--chdir", WORKSPACE, "--clearenv"]
        environment = SANDBOX_ENVIRONMENT | {
            "PATH": f"{Path(python).parent}:/usr/local/bin:/usr/bin:/bin"
        }
        for key, value in environment.items():
            args += ["--setenv", key, value]
        args += ["--info-fd", str(info_fd), "--"]
        args += [
            "/usr/bin/prlimit",
            f"--cpu={limits.cpu_sec}",
            f"--as={limits.memory_mb * 1024 * 1024}",
            f"--nproc={limits.max_procs}",
            # One byte over the workspace's limit: a file that reaches it fails to grow
            # (EFBIG) and is then too large to keep.
            f"--fsize={limits.file_bytes + 1}",
            "--core=0",
            "--",
        ]
        if spec.language == "python":
            args += [python, "-I", "-B", f"{CODE_DIR}/boot.py"]
        else:
            args += ["/bin/bash", f"{CODE_DIR}/main.sh"]
        return args

    def _write_code(self, spec: RunSpec) -> None:
        code_dir = spec.workspace.parent / "code"
        code_dir.mkdir(mode=0o755)
        if spec.language == "python":
            (code_dir / "main.py").write_text(spec.code, encoding="utf-8")
            (code_dir / "boot.py").write_text(BOOT, encoding="utf-8")
        else:
            (code_dir / "main.sh").write_text(spec.code, encoding="utf-8")
        for file in code_dir.iterdir():
            file.chmod(stat.S_IRUSR | stat.S_IRGRP | stat.S_IROTH)

    async def run(self, spec: RunSpec, *, abort) -> RunOutcome:
        self._write_code(spec)
        return await _Run(self, spec, abort).outcome()


def _text(output: bytes) -> str:
    """A stream as text: undecodable bytes and NULs (which no store keeps in a text, and
    which PostgreSQL refuses) become U+FFFD."""
    return output.decode("utf-8", "replace").replace("\x00", "\ufffd")


def spawn_user() -> dict:
    """Arguments of the subprocess call that start bwrap as SANDBOX_UID when we are root."""
    if os.geteuid() != 0:
        return {}
    uid = settings.SANDBOX_UID
    return {"user": uid, "group": uid, "extra_groups": []}


class _Run:
    """One bwrap process: its output read as it comes, its end raced against the wall
    clock and a Stop."""

    def __init__(self, backend: BwrapBackend, spec: RunSpec, abort):
        self.backend, self.spec, self.abort = backend, spec, abort
        self.killed: str | None = None
        self.child_pid: int | None = None
        self.process: asyncio.subprocess.Process | None = None
        self.kill_after = max(spec.limits.output_bytes * OUTPUT_KILL_FACTOR, 1024 * 1024)

    async def outcome(self) -> RunOutcome:
        limits = self.spec.limits
        read_fd, write_fd = os.pipe()
        info_pipe = os.fdopen(read_fd, "rb", 0)
        started = time.monotonic()
        try:
            self.process = await asyncio.create_subprocess_exec(
                *self.backend.command(self.spec, write_fd),
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                pass_fds=(write_fd,),
                start_new_session=True,
                # Not the server's environment: bwrap stays the namespace's first process,
                # and a program inside may read that process's environment in /proc/1.
                env=BWRAP_ENVIRONMENT,
                **spawn_user(),
            )
        except BaseException:
            info_pipe.close()
            raise
        finally:
            os.close(write_fd)
        info = asyncio.ensure_future(self._child_pid(info_pipe))
        streams = asyncio.gather(
            self._read(self.process.stdout), self._read(self.process.stderr), self.process.wait()
        )
        stop = asyncio.ensure_future(self.abort.wait_async(None))
        aborted = False
        try:
            done, _ = await asyncio.wait(
                {streams, stop}, timeout=limits.wall_sec, return_when=asyncio.FIRST_COMPLETED
            )
            if streams not in done:
                aborted = stop in done
                self.killed = self.killed or (None if aborted else KILLED_TIMEOUT)
                await self._kill()
            (stdout, out_dropped), (stderr, err_dropped), returncode = await streams
            # bwrap has exited: its report is in the pipe, or never will be.
            await asyncio.wait({info}, timeout=KILL_GRACE_SEC)
        finally:
            stop.cancel()
            info.cancel()
            info_pipe.close()
            if self.process.returncode is None:
                await self._kill()
        duration_ms = round((time.monotonic() - started) * 1000)
        if self.child_pid is None and not aborted and self.killed is None:
            # bwrap itself failed before the program began: no result of the program's.
            detail = (stderr.decode("utf-8", "replace").strip().splitlines() or ["?"])[-1]
            raise SandboxFailed(f"the sandbox could not start: {detail[:500]}")
        killed = self.killed
        exit_code = None if aborted or killed else returncode
        if killed is None and self.spec.language == "python" and returncode == MEMORY_EXIT_CODE:
            killed, exit_code = KILLED_MEMORY, 1
        elif killed is None and returncode in CPU_SIGNALS:
            killed, exit_code = KILLED_TIMEOUT, None  # the kernel ended it at RLIMIT_CPU
        return RunOutcome(
            exit_code=exit_code,
            stdout=_text(stdout),
            stderr=_text(stderr),
            truncated=bool(out_dropped or err_dropped),
            duration_ms=duration_ms,
            killed=None if aborted else killed,
            aborted=aborted,
        )

    async def _child_pid(self, pipe) -> None:
        """bwrap's `--info-fd` JSON names the namespace's first process (a host pid)."""
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader()
        transport, _ = await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(reader), pipe
        )
        try:
            text = await reader.readuntil(b"}")
            self.child_pid = int(json.loads(text)["child-pid"])
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError, KeyError):
            pass
        finally:
            transport.close()

    async def _read(self, stream: asyncio.StreamReader) -> tuple[bytes, int]:
        kept = bytearray()
        dropped = 0
        cap = self.spec.limits.output_bytes
        while chunk := await stream.read(READ_CHUNK):
            room = max(0, cap - len(kept))
            kept += chunk[:room]
            dropped += len(chunk) - min(room, len(chunk))
            if dropped > self.kill_after and self.killed is None:
                self.killed = KILLED_OUTPUT
                await self._kill()
        return bytes(kept), dropped

    async def _kill(self) -> None:
        """End every process of the run and wait until they are gone.

        Killing the PID namespace's first process makes the kernel kill the rest and reap
        them before that process's parent (the outer bwrap) sees it end; the outer bwrap
        then exits. Before the namespace exists (no child pid yet) the process group —
        bwrap and its first child — is killed instead."""
        process = self.process
        if process is None or process.returncode is not None:
            return
        target = self.child_pid
        try:
            if target is not None:
                os.kill(target, signal.SIGKILL)
            else:
                os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        try:
            await asyncio.wait_for(asyncio.shield(process.wait()), KILL_GRACE_SEC)
        except TimeoutError:
            try:
                os.killpg(process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            await process.wait()


def scratch_root() -> str:
    return settings.SANDBOX_SCRATCH_DIR or tempfile.gettempdir()
