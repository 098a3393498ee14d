"""The workspace's way in and out of a run: one stream each (inside.py has the formats).

In: `write_pack` writes the session's files, read from the blob store, as the pack the
sandbox's first program unpacks into `/workspace` (a pipe: nothing goes through the disk).
Out: `read_pack` reads what that program sends back once the run's program has ended. That
program shares the run's user, so what it sends is the run's own writing and is read as
hostile: every path is checked as a manifest path (`paths.path_valid`), a file handed in
can be named unchanged only by its own path, each path once, and the bytes are bounded by
the size of the run's `/workspace`. Files come back hashed as they arrive, held in memory up
to a bound and on the run's scratch directory beyond it, until the caller keeps or drops
them.
"""

from __future__ import annotations

import hashlib
import io
import os
import struct
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from sessions_app.runtime.sandbox import inside
from sessions_app.runtime.sandbox.base import HandedFile
from sessions_app.runtime.sandbox.paths import path_valid
from sessions_app.store.blobs import blob_local_path, blob_open

COPY_CHUNK = 8 * 1024 * 1024
# What a run's returned files may hold in memory in all, and one of them; the rest is
# spooled to the run's scratch directory.
MEMORY_BYTES = 16 * 1024 * 1024
MEMORY_FILE_BYTES = 1024 * 1024
# Notes (links, special files) kept per run; more are counted.
MAX_NOTES = 50
# Bytes of a path as sent: MAX_PATH_CHARS characters of up to four bytes each.
MAX_PATH_BYTES = 4 * 1000
# A tmpfs rounds each file up to a page; the size of a run's /workspace leaves that room
# for every file handed in, and a little more for the run's own.
PAGE = 4096
SPARE_PAGES = 16


def workspace_room(files: Mapping[str, HandedFile], max_bytes: int) -> int:
    """The size of the tmpfs a run gets as `/workspace`: `max_bytes` (or what was handed in,
    when a lower limit now leaves less room than the session's files take), plus a page per
    file handed in (a tmpfs counts whole pages)."""
    handed = sum(file.size for file in files.values())
    return max(max_bytes, handed) + PAGE * (len(files) + SPARE_PAGES)


def write_pack(fd: int, files: Mapping[str, HandedFile]) -> None:
    """The pack in, written to `fd` (blocking; a thread's work). Each blob is sent with one
    system call where the store is a directory, else copied through its stream."""
    header = bytearray(inside.MAGIC_IN)
    for path, file in files.items():
        name = path.encode("utf-8")
        header += b"F" + inside.PATH.pack(len(name)) + name
        local = blob_local_path(file.sha256)
        if local is not None:
            source = os.open(local, os.O_RDONLY | os.O_CLOEXEC)
            try:
                size = os.fstat(source).st_size
                header += inside.SIZE.pack(size)
                inside.write_all(fd, header)
                header.clear()
                left = size
                while left:
                    sent = os.sendfile(fd, source, None, min(left, COPY_CHUNK))
                    if not sent:
                        raise OSError(f"the blob {file.sha256} ended early")
                    left -= sent
            finally:
                os.close(source)
        else:
            header += inside.SIZE.pack(file.size)
            inside.write_all(fd, header)
            header.clear()
            with blob_open(file.sha256) as source:
                _copy_exactly(source, fd, file.size, file.sha256)
    inside.write_all(fd, bytes(header) + b"E")


def _copy_exactly(source: BinaryIO, fd: int, size: int, sha256: str) -> None:
    left = size
    while left:
        data = source.read(min(left, COPY_CHUNK))
        if not data:
            raise OSError(f"the blob {sha256} ended early")
        inside.write_all(fd, data)
        left -= len(data)
    if source.read(1):
        raise OSError(f"the blob {sha256} is longer than its record")


@dataclass
class ReturnedFile:
    sha256: str
    size: int
    file: BinaryIO  # at its start; closed by Returned.close()


@dataclass
class Returned:
    """What a run's workspace came back as (`read_pack`)."""

    files: dict[str, ReturnedFile] = field(default_factory=dict)  # created or sent back
    unchanged: set[str] = field(default_factory=set)  # handed in, untouched
    notes: list[str] = field(default_factory=list)  # what was not kept, and why
    too_many: bool = False  # more than MAX_FILES files: nothing is kept
    full_workspace: bool = False  # /workspace had no room left: some write failed
    full_tmp: bool = False
    # The end record: (how, exit code or signal); None when none came.
    end: tuple[int, int] | None = None
    # Why nothing of the run can be kept (no end record, a pack that breaks the rules).
    lost: str | None = None
    # The sandbox's first program could not set the run up (the program never ran).
    setup_error: str | None = None

    def close(self) -> None:
        for file in self.files.values():
            file.file.close()
        self.files.clear()


class _Refused(Exception):
    pass


class _Reader:
    def __init__(self, fd: int):
        self.stream = open(fd, "rb", buffering=inside.CHUNK)  # noqa: SIM115 - closed by read_pack

    def exact(self, count: int) -> bytes:
        data = self.stream.read(count)
        if len(data) != count:
            raise EOFError
        return data

    def path(self) -> bytes:
        (length,) = inside.PATH.unpack(self.exact(inside.PATH.size))
        if length > MAX_PATH_BYTES:
            raise _Refused("a path longer than a workspace path can be")
        return self.exact(length)


def read_pack(
    fd: int, handed: Mapping[str, HandedFile], *, max_bytes: int, spool_dir: Path
) -> Returned:
    """Read the pack out from `fd` to its end (blocking; a thread's work) and close `fd`.

    `max_bytes` bounds the files' bytes in all (the run's /workspace could not hold more);
    past it, or at anything else out of order, reading stops (the sandbox's writes then
    fail) and nothing of the run is kept."""
    returned = Returned()
    reader = _Reader(fd)
    budget = _Budget(max_bytes)
    try:
        _read_records(reader, returned, handed, budget, spool_dir)
    except EOFError:
        if returned.end is None and returned.setup_error is None:
            returned.lost = (
                "the sandbox's own process that returns the files ended before it was done "
                "(the program killed it, or a limit did): nothing of this run was kept"
            )
    except (_Refused, UnicodeError, struct.error) as error:
        returned.lost = (
            f"the sandbox returned the files out of order ({error}): nothing of this run was kept"
        )
    finally:
        reader.stream.close()
    if returned.lost or returned.setup_error:
        returned.close()
    return returned


@dataclass
class _Budget:
    max_bytes: int
    total: int = 0
    in_memory: int = 0
    records: int = 0
    notes_dropped: int = 0


def _read_records(reader, returned: Returned, handed, budget: _Budget, spool_dir: Path) -> None:
    if reader.exact(len(inside.MAGIC_OUT)) != inside.MAGIC_OUT:
        raise _Refused("no header")
    seen: set[str] = set()
    while True:
        kind = reader.exact(1)
        if kind == b"E":
            how, value, full = inside.END.unpack(reader.exact(inside.END.size))
            returned.end = (how, value)
            returned.full_workspace = bool(full & inside.FULL_WORKSPACE)
            returned.full_tmp = bool(full & inside.FULL_TMP)
            if budget.notes_dropped:
                returned.notes.append(f"{budget.notes_dropped} more not kept")
            return
        if kind == b"X":
            returned.setup_error = reader.path().decode("utf-8", "replace")
            return
        budget.records += 1
        # Each record names one entry of the listing, which stops past MAX_ENTRIES.
        if budget.records > inside.MAX_ENTRIES + 1:
            raise _Refused("too many records")
        if kind == b"M":
            returned.too_many = True
            continue
        if kind not in {b"F", b"U", b"L", b"O"}:
            raise _Refused(f"a record {kind!r}")
        raw = reader.path()
        try:
            path = raw.decode("utf-8")
        except UnicodeError:
            path = None
        shown = raw.decode("utf-8", "replace")
        if kind == b"L":
            _note(returned, budget, f"{shown}: a symbolic link, not kept")
            continue
        if kind == b"O":
            _note(returned, budget, f"{shown}: not a regular file, not kept")
            continue
        if path is not None and path in seen:
            raise _Refused("a path named twice")
        if kind == b"U":
            if path not in handed:
                raise _Refused("a file named unchanged that was not handed in")
            seen.add(path)
            returned.unchanged.add(path)
            continue
        valid = path is not None and path_valid(path)
        received = _receive(reader, budget, spool_dir, keep=valid)
        if not valid:
            _note(returned, budget, f"{shown}: not a valid workspace path, not kept")
            continue
        seen.add(path)
        if received is None:
            _note(returned, budget, f"{shown}: could not be read, not kept")
            continue
        returned.files[path] = received


def _note(returned: Returned, budget: _Budget, note: str) -> None:
    if len(returned.notes) < MAX_NOTES:
        returned.notes.append(note)
    else:
        budget.notes_dropped += 1


def _receive(reader, budget: _Budget, spool_dir: Path, *, keep: bool) -> ReturnedFile | None:
    """One file's chunks, hashed and held (or only read, when not `keep`); None when the
    sandbox could not read it to its end."""
    digest = hashlib.sha256()
    size = 0
    held = bytearray()
    spool: BinaryIO | None = None
    try:
        while True:
            (length,) = inside.CHUNK_LEN.unpack(reader.exact(inside.CHUNK_LEN.size))
            if length == inside.UNREADABLE:
                keep = False
                break
            if length == 0:
                break
            if length > inside.CHUNK:
                raise _Refused("a chunk larger than the sandbox sends")
            budget.total += length
            if budget.total > budget.max_bytes:
                raise _Refused("more bytes than the run's workspace can hold")
            data = reader.exact(length)
            if not keep:
                continue
            digest.update(data)
            size += length
            if spool is None and (
                size > MEMORY_FILE_BYTES or budget.in_memory + size > MEMORY_BYTES
            ):
                spool = tempfile.TemporaryFile(dir=spool_dir)  # noqa: SIM115 - Returned closes it
                spool.write(held)
                held = bytearray()
            if spool is None:
                held += data
            else:
                spool.write(data)
    except BaseException:
        if spool is not None:
            spool.close()
        raise
    if not keep:
        if spool is not None:
            spool.close()
        return None
    if spool is None:
        budget.in_memory += size
        spool = io.BytesIO(held)
    spool.seek(0)
    return ReturnedFile(sha256=digest.hexdigest(), size=size, file=spool)
