"""Runs on this machine under bubblewrap (Debian's `bubblewrap`), in namespaces of its own.

The program gets new user, PID, network, IPC and UTS namespaces (the network one only
without SANDBOX_NETWORK); it sees read-only system directories (`/usr` and its links), the
sandbox's Python read-only, `/workspace` and a private `/tmp` — each a tmpfs of the run's own
whose size caps what the run writes there (SANDBOX_WORKSPACE_MAX_BYTES, plus a page per file
handed in; SANDBOX_TMP_MAX_BYTES), the only writable places; no capabilities; it dies with
the worker (`--die-with-parent`). `prlimit` inside sets the limits that hold per process:
CPU seconds, address space, processes, file size, no core files.

The session's files go in as one stream on bwrap's stdin and come back as one on a pipe of
their own (pack.py; inside.py is the first program inside, which unpacks them, runs the
person's program as its child and, once that has ended, returns what changed). The wall
clock is that first program's, and this module's too, later: past the wall clock and a
grace for returning the files, or at a Stop, the run is ended by killing the PID
namespace's first process, which takes every other process of the namespace with it before
its parent sees it end — so when `run` returns, nothing of the run is left. The output cap
asks the first program to stop the run (stdin closed), so the files written so far come
back as after a timeout.

A server running as root starts bwrap as SANDBOX_UID: the kernel does not count a root
user's processes against RLIMIT_NPROC, and a fork bomb would then meet no limit.
"""

from __future__ import annotations

import asyncio
import functools
import importlib.util
import json
import marshal
import os
import shutil
import signal
import stat
import sys
import tempfile
import threading
import time
from pathlib import Path

from django.conf import settings

from sessions_app.runtime.sandbox import inside
from sessions_app.runtime.sandbox.base import (
    KILLED_MEMORY,
    KILLED_OUTPUT,
    KILLED_TIMEOUT,
    RunOutcome,
    RunSpec,
    SandboxBackend,
)
from sessions_app.runtime.sandbox.pack import Returned, read_pack, workspace_room, write_pack

MEMORY_EXIT_CODE = inside.MEMORY_EXIT_CODE
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
# How long past the wall clock (or a request to stop) the first program inside may take to
# return the files before the run is killed and nothing of it kept.
COLLECT_GRACE_SEC = 10.0
WORKSPACE = inside.WORKSPACE
CODE_DIR = inside.CODE_DIR
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

# The first program inside (inside.py), written beside the run's code.
BOOT = Path(inside.__file__).read_text(encoding="utf-8")


@functools.cache
def boot_file(python: str) -> tuple[str, bytes]:
    """(name, contents) of the first program as written beside a run's code: compiled —
    `boot.pyc`, which Python runs as a script — when the sandbox's Python is a virtualenv of
    this Python's version (compiling it is a millisecond or more of every run), else its
    source, `boot.py`."""
    config = Path(python).parent.parent / "pyvenv.cfg"
    version = ""
    if config.is_file():
        for line in config.read_text(encoding="utf-8").splitlines():
            key, _, value = line.partition("=")
            if key.strip() in {"version", "version_info"}:
                version = value.strip()
    if sys.implementation.name == "cpython" and version.split(".")[:2] == [
        str(sys.version_info.major),
        str(sys.version_info.minor),
    ]:
        code = compile(BOOT, "boot.py", "exec", dont_inherit=True)
        # A .pyc's header: the magic number, then flags and two words a script run skips.
        return "boot.pyc", importlib.util.MAGIC_NUMBER + bytes(12) + marshal.dumps(code)
    return "boot.py", BOOT.encode("utf-8")


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

    def command(self, spec: RunSpec, info_fd: int, out_fd: int) -> list[str]:
        """bwrap's command line: the namespaces and mounts, then `prlimit` and the first
        program inside, which returns the files on `out_fd`."""
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
        args += ["--proc", "/proc", "--dev", "/dev"]
        args += ["--size", str(limits.tmp_bytes), "--tmpfs", "/tmp", "--dir", MPL_DIR]
        python, binds = python_binds(self.python)
        for host_dir, seen_at in binds:
            args += ["--ro-bind", host_dir, seen_at]
        # The font list sandbox_setup built: matplotlib finds it instead of building it
        # again on every run (seconds). Its directory stays writable for the rest.
        cache = Path(self.python).parent.parent / "mplconfig"
        if cache.is_dir():
            for file in cache.glob("fontlist-*.json"):
                args += ["--ro-bind", str(file), f"{MPL_DIR}/{file.name}"]
        room = workspace_room(spec.files, limits.file_bytes)
        args += ["--size", str(room), "--perms", "0755", "--tmpfs", WORKSPACE]
        if spec.attachments is not None:
            args += ["--ro-bind", str(spec.attachments), f"{WORKSPACE}/attachments"]
        args += ["--ro-bind", str(spec.scratch / "code"), CODE_DIR]
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
            # (EFBIG) and is then too large to keep. (A file handed in that is larger — the
            # limit was lowered since — must still be unpacked.)
            f"--fsize={max([limits.file_bytes, *(f.size for f in spec.files.values())]) + 1}",
            "--core=0",
            "--",
        ]
        wall = f"{limits.wall_sec:g}"
        boot = f"{CODE_DIR}/{boot_file(self.python)[0]}"
        return [*args, python, "-I", "-B", boot, str(out_fd), wall, spec.language]

    def _write_code(self, spec: RunSpec) -> None:
        code_dir = spec.scratch / "code"
        code_dir.mkdir(mode=0o755)
        name, boot = boot_file(self.python)
        (code_dir / name).write_bytes(boot)
        name = "main.py" if spec.language == "python" else "main.sh"
        (code_dir / name).write_text(spec.code, encoding="utf-8")
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


def _in_thread(function, *args) -> asyncio.Future:
    """`function(*args)` on a thread of its own (it blocks on a pipe for as long as the run
    lasts, so not a pool's), its result a future of the running loop."""
    loop = asyncio.get_running_loop()
    future = loop.create_future()

    def settle(result, error) -> None:
        if future.done():
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(result)

    def target() -> None:
        result = error = None
        try:
            result = function(*args)
        except BaseException as failure:  # noqa: BLE001 - handed to the loop
            error = failure
        try:
            loop.call_soon_threadsafe(settle, result, error)
        except RuntimeError:
            pass  # the loop is gone; nobody waits

    threading.Thread(target=target, name="jarvis-sandbox-pipe", daemon=True).start()
    return future


class _Run:
    """One bwrap process: the files fed in and read back, its output read as it comes, its
    end raced against the wall clock and a Stop."""

    def __init__(self, backend: BwrapBackend, spec: RunSpec, abort):
        self.backend, self.spec, self.abort = backend, spec, abort
        self.killed: str | None = None
        self.child_pid: int | None = None
        self.process: asyncio.subprocess.Process | None = None
        self.kill_after = max(spec.limits.output_bytes * OUTPUT_KILL_FACTOR, 1024 * 1024)
        self.input_fd: int | None = None  # bwrap's stdin: the pack in, then the stop signal
        self.feeding: asyncio.Future | None = None
        self.feed_error: BaseException | None = None
        self.stop_requested = False
        self.finished = False
        self.stop_deadline: float | None = None
        self.wakeup = asyncio.Event()

    async def outcome(self) -> RunOutcome:
        limits = self.spec.limits
        info_read, info_write = os.pipe()
        out_read, out_write = os.pipe()
        in_read, in_write = os.pipe()
        info_pipe = os.fdopen(info_read, "rb", 0)
        started = time.monotonic()
        try:
            self.process = await asyncio.create_subprocess_exec(
                *self.backend.command(self.spec, info_write, out_write),
                stdin=in_read,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                pass_fds=(info_write, out_write),
                start_new_session=True,
                # Not the server's environment: bwrap stays the namespace's first process,
                # and a program inside may read that process's environment in /proc/1.
                env=BWRAP_ENVIRONMENT,
                **spawn_user(),
            )
        except BaseException:
            info_pipe.close()
            os.close(out_read)
            os.close(in_write)
            raise
        finally:
            for fd in (info_write, out_write, in_read):
                os.close(fd)
        self.input_fd = in_write
        self.feeding = _in_thread(write_pack, in_write, self.spec.files)
        self.feeding.add_done_callback(self._fed)
        returning = _in_thread(
            functools.partial(
                read_pack,
                out_read,
                self.spec.files,
                max_bytes=workspace_room(self.spec.files, limits.file_bytes),
                spool_dir=self.spec.scratch,
            )
        )
        info = asyncio.ensure_future(self._child_pid(info_pipe))
        streams = asyncio.gather(
            self._read(self.process.stdout),
            self._read(self.process.stderr),
            self.process.wait(),
            returning,
        )
        stop = asyncio.ensure_future(self.abort.wait_async(None))
        aborted = False
        # The first program inside keeps the wall clock; this is for when it does not.
        deadline = started + limits.wall_sec + COLLECT_GRACE_SEC
        try:
            while not streams.done():
                ends = min(deadline, self.stop_deadline or deadline)
                if time.monotonic() >= ends:
                    self.killed = self.killed or KILLED_TIMEOUT
                    await self._kill()
                    break
                self.wakeup.clear()
                wake = asyncio.ensure_future(self.wakeup.wait())
                done, _ = await asyncio.wait(
                    {streams, stop, wake},
                    timeout=ends - time.monotonic(),
                    return_when=asyncio.FIRST_COMPLETED,
                )
                wake.cancel()
                if stop in done and not streams.done():
                    aborted = True
                    await self._kill()
                    break
            (stdout, out_dropped), (stderr, err_dropped), returncode, returned = await streams
            # bwrap has exited: its report is in the pipe, or never will be.
            await asyncio.wait({info}, timeout=KILL_GRACE_SEC)
            # Nothing reads the pack in any more: the thread ends (if not already).
            await asyncio.wait({self.feeding})
        finally:
            stop.cancel()
            info.cancel()
            info_pipe.close()
            if self.process.returncode is None:
                await self._kill()
            self.finished = True
            if self.feeding.done():
                self._close_input()
        duration_ms = round((time.monotonic() - started) * 1000)
        try:
            return self._outcome(
                returned,
                stdout=stdout,
                stderr=stderr,
                truncated=bool(out_dropped or err_dropped),
                returncode=returncode,
                aborted=aborted,
                duration_ms=duration_ms,
            )
        except BaseException:
            returned.close()
            raise

    def _outcome(
        self,
        returned: Returned,
        *,
        stdout: bytes,
        stderr: bytes,
        truncated: bool,
        returncode: int,
        aborted: bool,
        duration_ms: int,
    ) -> RunOutcome:
        if self.feed_error is not None and not aborted:
            raise SandboxFailed(f"the workspace could not be handed over: {self.feed_error}")
        if self.child_pid is None and not aborted and self.killed is None:
            # bwrap itself failed before the program began: no result of the program's.
            detail = (stderr.decode("utf-8", "replace").strip().splitlines() or ["?"])[-1]
            raise SandboxFailed(f"the sandbox could not start: {detail[:500]}")
        if returned.setup_error is not None and not aborted:
            raise SandboxFailed(f"the sandbox could not start: {returned.setup_error[:500]}")
        killed = self.killed
        exit_code = None if aborted or killed else returncode
        if returned.end is None:
            if killed is not None:
                returned.lost = (
                    "the run was ended before its files came back: nothing of this run was kept"
                )
        else:
            how, value = returned.end
            if how in {inside.WALL_CLOCK, inside.STOPPED}:
                killed, exit_code = killed or KILLED_TIMEOUT, None
            elif killed is None:
                exit_code = value if how == inside.EXITED else 128 + value
                if self.spec.language == "python" and exit_code == MEMORY_EXIT_CODE:
                    killed, exit_code = KILLED_MEMORY, 1
                elif exit_code in CPU_SIGNALS:
                    killed, exit_code = KILLED_TIMEOUT, None  # the kernel ended it at RLIMIT_CPU
        if aborted:
            returned.close()
        return RunOutcome(
            exit_code=None if aborted else exit_code,
            stdout=_text(stdout),
            stderr=_text(stderr),
            truncated=truncated,
            duration_ms=duration_ms,
            killed=None if aborted else killed,
            aborted=aborted,
            workspace=None if aborted else returned,
        )

    def _fed(self, future: asyncio.Future) -> None:
        error = None if future.cancelled() else future.exception()
        if error is not None and not isinstance(error, BrokenPipeError):
            # A blob that could not be read: the run cannot have its files. (A broken pipe
            # is a run that ended before it read them all; its outcome says why.)
            self.feed_error = error
            self.wakeup.set()
            asyncio.ensure_future(self._kill())
        if self.stop_requested or self.finished:
            self._close_input()

    def _close_input(self) -> None:
        """The end of bwrap's stdin: once the pack is in, it asks the first program inside
        to stop the run. Only once the thread writing it is done with it."""
        if self.input_fd is not None:
            os.close(self.input_fd)
            self.input_fd = None

    def _request_stop(self, reason: str) -> None:
        """Ask the first program inside to end the run now and return its files; past
        COLLECT_GRACE_SEC the run is killed instead."""
        self.killed = self.killed or reason
        if self.stop_requested:
            return
        self.stop_requested = True
        self.stop_deadline = time.monotonic() + COLLECT_GRACE_SEC
        self.wakeup.set()
        if self.feeding is not None and self.feeding.done():
            self._close_input()

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
                self._request_stop(KILLED_OUTPUT)
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
