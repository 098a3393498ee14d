"""The first program of every run inside the sandbox (bwrap.py starts it as `/sandbox/boot.py`).

It runs as the sandbox's user, under the run's limits, and does three things:

1. unpacks the session's files, which come as one stream on stdin (the pack in, below), into
   `/workspace` — a tmpfs of the run's own whose size caps what the run may write;
2. runs the person's program as its child: Python in this same interpreter after a fork
   (no second start), bash by exec; the child's stdin is /dev/null and it holds neither
   stream of this process;
3. when the child has ended — or the wall clock (`WALL_SEC`) passed, or the worker closed
   stdin to stop the run (its output cap) — kills every process the program left, lists
   `/workspace` and writes what changed to `OUT_FD` (the pack out, below), then exits.

The program runs as the same user and may kill or stop this process: the worker then gets no
end record and keeps nothing of the run, and says so. Whatever this process sends, the worker
treats as the program's own writing (hostile): it checks every path and bounds every size.

Standard library only, nothing of the project's: it runs with the sandbox's Python, started
as `python -I -B boot.py OUT_FD WALL_SEC LANGUAGE`.

The pack in (the worker to here, on stdin): `MAGIC_IN`, then for each file `b"F"`, the UTF-8
path's length (`PATH`) and the path, the size (`SIZE`) and the bytes; then `b"E"`. The worker
keeps stdin open afterwards: its end (or any byte) asks this process to stop the run.

The pack out (here to the worker, on OUT_FD), written once the program has ended:
`MAGIC_OUT`, then records, each a kind byte:
- `F` + path: a file created or changed (or not known to be unchanged), then its bytes as
  chunks, each a length (`CHUNK_LEN`, at most CHUNK) and that many bytes, ended by a zero
  length — or by UNREADABLE when the file could not be read to its end;
- `U` + path: a file handed in and untouched (size, mtime, ctime and inode as unpacked);
- `L` + path: a symbolic link; `O` + path: neither a regular file nor a directory (not kept);
- `M`: more than MAX_FILES files, or MAX_ENTRIES names in all: the listing stops there;
- `X` + message: the run could not be set up (the program never ran); the pack ends here;
- `E` + `END` (how the program ended, the exit code or signal, the FULL_* flags): the end.
A path is its length (`PATH`) and its bytes (the file system's name, UTF-8 when valid).
"""

# `_signal`, not `signal`: the latter builds its enums on import, a tenth of Python's start.
import _signal as signal
import os
import select
import stat
import struct
import sys
import time

WORKSPACE = "/workspace"
TMP = "/tmp"
ATTACHMENTS = "attachments"
CODE_DIR = "/sandbox"
MAX_FILES = 10_000
MAX_ENTRIES = 4 * MAX_FILES
CHUNK = 1024 * 1024
# Python code that hits its memory limit ends with this code, so the run reports
# `killed: "memory"` rather than a traceback the model must interpret.
MEMORY_EXIT_CODE = 86
# How long the processes the program left may take to be gone once killed (reaped by bwrap's
# first process, the namespace's init), before the listing goes ahead regardless.
GONE_WAIT_SEC = 0.5

MAGIC_IN = b"JWSIN1\n"
MAGIC_OUT = b"JWSOUT1\n"
PATH = struct.Struct("<H")
SIZE = struct.Struct("<Q")
CHUNK_LEN = struct.Struct("<I")
# A chunk length that ends a file which could not be read to its end.
UNREADABLE = 0xFFFFFFFF
END = struct.Struct("<BiB")
# How the program ended (END's first field).
EXITED, SIGNALED, WALL_CLOCK, STOPPED = 0, 1, 2, 3
# END's flags: a tmpfs had no room left, so some write of the program's failed (ENOSPC).
FULL_WORKSPACE, FULL_TMP = 1, 2


class Unreadable(Exception):
    """The pack in is not what the worker writes."""


def _exact(stream, count: int) -> bytes:
    data = stream.read(count)
    if len(data) != count:
        raise Unreadable("the pack of the workspace ended early")
    return data


def write_all(fd: int, data: bytes) -> None:
    """All of `data` to `fd` (the worker's pack writer uses it too)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def unpack(stream) -> dict:
    """The pack in, written under WORKSPACE: {path: (size, mtime_ns, ctime_ns, inode)}."""
    if stream.read(len(MAGIC_IN)) != MAGIC_IN:
        raise Unreadable("the pack of the workspace has no header")
    seen = {}
    made = {""}
    while True:
        kind = _exact(stream, 1)
        if kind == b"E":
            return seen
        if kind != b"F":
            raise Unreadable(f"the pack of the workspace has a record {kind!r}")
        (length,) = PATH.unpack(_exact(stream, PATH.size))
        path = _exact(stream, length).decode("utf-8")
        (size,) = SIZE.unpack(_exact(stream, SIZE.size))
        parent = os.path.dirname(path)
        if parent not in made:
            _make_parents(parent, made)
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        fd = os.open(os.path.join(WORKSPACE, path), flags, 0o644)
        try:
            left = size
            while left:
                data = _exact(stream, min(left, CHUNK))
                write_all(fd, data)
                left -= len(data)
            info = os.fstat(fd)
        finally:
            os.close(fd)
        seen[path] = (info.st_size, info.st_mtime_ns, info.st_ctime_ns, info.st_ino)


def _make_parents(parent: str, made: set) -> None:
    missing = []
    while parent not in made:
        missing.append(parent)
        parent = os.path.dirname(parent)
    for directory in reversed(missing):
        os.mkdir(os.path.join(WORKSPACE, directory), 0o755)
        made.add(directory)


def _child(out_fd: int, language: str):
    """In the forked child: the program's standard input is /dev/null and the pack's pipe is
    closed. Bash replaces this process; Python's code is returned, compiled, for the module's
    top level to run."""
    os.close(out_fd)
    null = os.open("/dev/null", os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    if language == "bash":
        # Python ignores these two; bash and what it starts get the defaults, as a shell
        # started by anything else would.
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
        signal.signal(signal.SIGXFSZ, signal.SIG_DFL)
        try:
            os.execv("/bin/bash", ["bash", CODE_DIR + "/main.sh"])
        except OSError as error:
            os.write(2, f"bash could not start: {error}\n".encode())
        os._exit(127)
    sys.argv = ["main.py"]
    sys.path.insert(0, WORKSPACE)
    with open(CODE_DIR + "/main.py", encoding="utf-8") as source:
        return compile(source.read(), "main.py", "exec")


def _wait(pid: int, deadline: float) -> tuple:
    """(how, exit code or signal) once the child has ended, the wall clock has passed or the
    worker has asked to stop (stdin readable: its end, or a byte)."""
    pidfd = os.pidfd_open(pid)
    poller = select.poll()
    poller.register(pidfd, select.POLLIN)
    poller.register(0, select.POLLIN)
    how = None
    while how is None:
        left = deadline - time.monotonic()
        if left <= 0:
            how = WALL_CLOCK
            break
        ready = {fd for fd, _ in poller.poll(left * 1000)}
        if pidfd in ready:
            break
        if 0 in ready:
            how = STOPPED
    if how is not None:
        _kill(signal.SIGKILL)
    _, status = os.waitpid(pid, 0)
    os.close(pidfd)
    _kill_the_rest()
    if how is not None:
        return how, 0
    if os.WIFSIGNALED(status):
        return SIGNALED, os.WTERMSIG(status)
    return EXITED, os.WEXITSTATUS(status)


def _kill(sig: int) -> bool:
    """Send `sig` to every process of the namespace but this one and bwrap's first (the
    init, which reaps them); False when there was none."""
    try:
        os.kill(-1, sig)
    except ProcessLookupError:
        return False
    return True


def _kill_the_rest() -> None:
    """Kill what the program left running and wait, bounded, until it is gone (reaped by the
    namespace's init): nothing writes while the workspace is listed."""
    if not _kill(signal.SIGKILL):
        return
    mine = {"1", str(os.getpid())}
    until = time.monotonic() + GONE_WAIT_SEC
    while time.monotonic() < until:
        if not [name for name in os.listdir("/proc") if name.isdigit() and name not in mine]:
            return
        time.sleep(0.001)


def _path(kind: bytes, relative: str) -> bytes:
    name = relative.encode("utf-8", "surrogateescape")
    return kind + PATH.pack(len(name)) + name


def _send_file(out, path: str) -> None:
    """The file's bytes as chunks, ended by a zero length; UNREADABLE instead when it cannot
    be opened as a regular file or read to its end (it is then not kept)."""
    try:
        fd = _open_own(path)
    except OSError:
        out.write(CHUNK_LEN.pack(UNREADABLE))
        return
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            out.write(CHUNK_LEN.pack(UNREADABLE))
            return
        while True:
            try:
                data = os.read(fd, CHUNK)
            except OSError:
                out.write(CHUNK_LEN.pack(UNREADABLE))
                return
            if not data:
                out.write(CHUNK_LEN.pack(0))
                return
            out.write(CHUNK_LEN.pack(len(data)))
            out.write(data)
    finally:
        os.close(fd)


def _open_own(path: str) -> int:
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
    try:
        return os.open(path, flags)
    except PermissionError:
        # The program may have taken its own file's read permission away; its owner (the
        # same user) gives it back.
        os.chmod(path, 0o600, follow_symlinks=False)
        return os.open(path, flags)


def _scan(directory: str) -> list:
    """The directory's entries. The program may have taken its own directory's permissions
    away (to list it, or to reach what is in it); its owner (the same user) gives them back."""
    if not os.access(directory, os.R_OK | os.X_OK):
        os.chmod(directory, 0o700)
    with os.scandir(directory) as items:
        return list(items)


def collect(out, seen: dict, ready_ns: int) -> None:
    """List WORKSPACE (never following a link) and write what changed."""
    files = entries = 0
    stack = [(WORKSPACE, "")]
    while stack:
        directory, prefix = stack.pop()
        try:
            items = _scan(directory)
        except OSError:
            continue
        for item in items:
            relative = prefix + item.name
            if relative == ATTACHMENTS:
                continue
            entries += 1
            if entries > MAX_ENTRIES:
                out.write(b"M")
                return
            try:
                info = item.stat(follow_symlinks=False)
            except OSError:
                continue
            mode = info.st_mode
            if stat.S_ISDIR(mode):
                stack.append((item.path, relative + "/"))
            elif stat.S_ISLNK(mode):
                out.write(_path(b"L", relative))
            elif not stat.S_ISREG(mode):
                out.write(_path(b"O", relative))
            else:
                files += 1
                if files > MAX_FILES:
                    out.write(b"M")
                    return
                now = (info.st_size, info.st_mtime_ns, info.st_ctime_ns, info.st_ino)
                # A file rewritten within the clock tick of the unpacking keeps its ctime:
                # one not older than `ready_ns` is sent whatever its stat says.
                if seen.get(relative) == now and now[2] < ready_ns:
                    out.write(_path(b"U", relative))
                    continue
                out.write(_path(b"F", relative))
                _send_file(out, item.path)


def _full(path: str) -> bool:
    try:
        return os.statvfs(path).f_bavail == 0
    except OSError:
        return False


def main():
    out_fd, wall_sec, language = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
    deadline = time.monotonic() + wall_sec
    stream = open(0, "rb", buffering=CHUNK, closefd=False)  # noqa: SIM115 - stdin, kept open
    try:
        seen = unpack(stream)
        os.utime(WORKSPACE)  # its ctime: the file system's now, once every file is in place
        ready_ns = os.stat(WORKSPACE).st_ctime_ns
    except (OSError, Unreadable, UnicodeError) as error:
        message = f"the workspace could not be unpacked: {error}".encode()[:2000]
        write_all(out_fd, MAGIC_OUT + b"X" + PATH.pack(len(message)) + message)
        os._exit(1)
    pid = os.fork()
    if pid == 0:
        return _child(out_fd, language)
    how, value = _wait(pid, deadline)
    with open(out_fd, "wb", buffering=CHUNK) as out:
        out.write(MAGIC_OUT)
        collect(out, seen, ready_ns)
        full = (FULL_WORKSPACE if _full(WORKSPACE) else 0) | (FULL_TMP if _full(TMP) else 0)
        out.write(b"E" + END.pack(how, value, full))
    os._exit(0)


if __name__ == "__main__":
    code = main()
    # The forked child, from here on: the person's program, as `python main.py` runs it.
    del main
    try:
        exec(code, {"__name__": "__main__", "__builtins__": __builtins__})  # noqa: S102
    except MemoryError:
        import traceback

        traceback.print_exc()
        sys.stderr.flush()
        os._exit(MEMORY_EXIT_CODE)
