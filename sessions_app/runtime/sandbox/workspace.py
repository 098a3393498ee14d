"""A session's workspace: a manifest `{path: sha256}` of content-addressed blobs (§23's store).

The manifest is kept in the session's entries: the result entry of each run that changed
something holds `data.workspace` — `{path: sha256}` for files it created or changed, `{path:
null}` for files it removed — so the workspace as of seq N is those changes folded in seq
order up to N. A branch, an edit or a regenerate copies the entries up to its cut and has
the workspace as it was there; a delete removes them; an export carries them; on every store
backend alike. Each blob is also linked to the session (a `BlobLink` named by its path):
that keeps it from `blobs_sweep`, counts it in the owner's quota and puts it in exports.

A run materializes the manifest into a scratch directory (`work/`, the program's
`/workspace`; the session's attachments read-only in `attachments/`), runs, and stores what
changed; then the directory goes. No worker keeps a session's files between runs.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from django.conf import settings

from sessions_app.core.file_types import workspace_file_type
from sessions_app.store.base import EntryRecord
from sessions_app.store.blobs import (
    BLOB_NAME_CHARS,
    blob_link,
    blob_local_path,
    blob_open,
    blobs_described,
    owner_links_many,
    owner_usage,
)

ATTACHMENTS = "attachments"
HASH_CHUNK = 1024 * 1024
# More files than this in one workspace are not kept (listing, copying and hashing them is
# each run's cost).
MAX_FILES = 10_000
MAX_PATH_CHARS = 1000


def workspace_changes(entry: EntryRecord) -> dict[str, str | None]:
    """What this entry changed in the workspace: {path: sha256, or None when removed}."""
    if entry.role != "tool" or not entry.data:
        return {}
    changes = entry.data.get("workspace")
    return changes if isinstance(changes, dict) else {}


def manifest_as_of(entries: Iterable[EntryRecord], at_seq: int | None = None) -> tuple[dict, int]:
    """(manifest, the seq of the entry that last changed it, 0 if none) up to `at_seq`."""
    manifest: dict[str, str] = {}
    as_of = 0
    for entry in entries:
        if at_seq is not None and entry.seq > at_seq:
            break
        changes = workspace_changes(entry)
        if not changes:
            continue
        as_of = entry.seq
        for path, sha256 in changes.items():
            if sha256 is None:
                manifest.pop(path, None)
            else:
                manifest[path] = sha256
    return manifest, as_of


def attachments_of_session(entries: Iterable[EntryRecord]) -> dict[str, str]:
    """The files the person attached to the session's prompts: {file name: sha256}, a name
    used twice gets the file's id beside it."""
    found: dict[str, str] = {}
    for entry in entries:
        refs = (entry.data or {}).get("attachments") if entry.role == "user" else None
        for ref in refs or ():
            if not isinstance(ref, dict) or not ref.get("id"):
                continue
            name = _safe_name(str(ref.get("name") or ref["id"]))
            if found.get(name, ref["id"]) != ref["id"]:
                name = f"{ref['id'][:12]}-{name}"
            found[name] = ref["id"]
    return found


def _safe_name(name: str) -> str:
    name = name.replace("/", "_").replace("\x00", "_").strip() or "file"
    return "_" + name if name in {".", ".."} else name


def path_valid(path: str) -> bool:
    """A manifest path: relative, normalized, no `..`, not under `attachments/`."""
    pure = PurePosixPath(path)
    return (
        0 < len(path) <= MAX_PATH_CHARS
        and not pure.is_absolute()
        and str(pure) == path
        and ".." not in pure.parts
        and pure.parts[0] != ATTACHMENTS
        and "\x00" not in path
    )


def _sandbox_owned(path: Path) -> None:
    """A server running as root hands the sandbox's user what it must write."""
    if os.geteuid() == 0:
        os.chown(path, settings.SANDBOX_UID, settings.SANDBOX_UID)


def scratch_prepare(scratch: Path) -> Path:
    """The run's directories under `scratch`: `work/` (the sandbox's user may write it) with
    the mount point of `attachments/`; the backend adds `code/`. Returns `work/`."""
    scratch.chmod(0o755)  # made private (mkdtemp): the sandbox's user must reach into it
    work = scratch / "work"
    work.mkdir(mode=0o755)
    (work / ATTACHMENTS).mkdir(mode=0o755)
    (scratch / ATTACHMENTS).mkdir(mode=0o755)
    _sandbox_owned(work)
    return work


@dataclass
class Materialized:
    work: Path
    attachments: Path
    manifest: dict[str, str]
    # What each file was when handed to the run, (size, mtime_ns, ctime_ns, inode): a file
    # still so is not read again. The run can restore a file's mtime but never its ctime.
    seen: dict[str, tuple[int, int, int, int]] = field(default_factory=dict)
    # The file system's time once every file was in place: a file whose ctime is not older
    # than this may be rewritten within the same clock tick (its ctime unchanged), so it is
    # hashed whatever its stat says.
    ready_ns: int = 0


def materialize(
    scratch: Path, manifest: dict[str, str], attachments: dict[str, str]
) -> Materialized:
    work = scratch_prepare(scratch)
    root = str(work)
    made = {""}  # directories under work/ made so far; the scratch directory starts empty
    seen = {}
    for path, sha256 in manifest.items():
        if not path_valid(path):
            continue
        parent = os.path.dirname(path)
        if parent not in made:
            _make_parents(root, parent, made)
        seen[path] = _copy_blob(sha256, os.path.join(root, path), owned=True)
    for name, sha256 in attachments.items():
        target = scratch / ATTACHMENTS / name
        _copy_blob(sha256, str(target), owned=False)
        target.chmod(0o444)
    os.utime(scratch)  # its ctime becomes the file system's now, on the files' own clock
    return Materialized(
        work=work,
        attachments=scratch / ATTACHMENTS,
        manifest=dict(manifest),
        seen=seen,
        ready_ns=os.stat(scratch).st_ctime_ns,
    )


def _make_parents(root: str, parent: str, made: set[str]) -> None:
    missing = []
    while parent not in made:
        missing.append(parent)
        parent = os.path.dirname(parent)
    for directory in reversed(missing):
        os.mkdir(os.path.join(root, directory), mode=0o755)
        _sandbox_owned(Path(root, directory))
        made.add(directory)


def _copy_blob(sha256: str, target: str, *, owned: bool) -> tuple[int, int, int, int]:
    """A copy of the blob at `target` (the sandbox may write it, never the blob): (size,
    mtime_ns, ctime_ns, inode) once it is in place."""
    out = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        local = blob_local_path(sha256)
        if local is not None:
            source = os.open(local, os.O_RDONLY | os.O_CLOEXEC)
            try:
                while os.sendfile(out, source, None, 8 * HASH_CHUNK):
                    pass
            finally:
                os.close(source)
        else:
            with blob_open(sha256) as source, open(out, "wb", closefd=False) as file:
                shutil.copyfileobj(source, file, HASH_CHUNK)
        if owned and os.geteuid() == 0:
            os.fchown(out, settings.SANDBOX_UID, settings.SANDBOX_UID)
        info = os.fstat(out)
    finally:
        os.close(out)
    return info.st_size, info.st_mtime_ns, info.st_ctime_ns, info.st_ino


@dataclass
class Collected:
    changes: dict[str, str | None]  # {path: sha256 | None}
    files: list[dict]  # created or changed: {path, id, mime, size} (+ width, height)
    notes: list[str]  # what was not kept, and why (the result's stderr says it)


def _walk(work: Path, notes: list[str]) -> dict[str, os.stat_result]:
    """The workspace's regular files, never following a link: a symbolic link (to a file in
    the workspace or outside it) is not kept, and neither is anything that is not a file."""
    found: dict[str, os.stat_result] = {}
    stack = [(str(work), "")]
    while stack:
        directory, prefix = stack.pop()
        with os.scandir(directory) as items:
            for item in items:
                # Built from listed names, so already normalized (no `.`, `..` or NUL).
                relative = prefix + item.name
                if relative == ATTACHMENTS:
                    continue
                info = item.stat(follow_symlinks=False)
                if stat.S_ISLNK(info.st_mode):
                    notes.append(f"{relative}: a symbolic link, not kept")
                elif stat.S_ISDIR(info.st_mode):
                    stack.append((item.path, relative + "/"))
                elif stat.S_ISREG(info.st_mode) and len(relative) <= MAX_PATH_CHARS:
                    found[relative] = info
                else:
                    notes.append(f"{relative}: not a regular file, not kept")
                if len(found) > MAX_FILES:
                    return found
    return found


def _digest(path: Path) -> str:
    digest = hashlib.sha256()
    # O_NOFOLLOW: what was a file when listed is read as that file, never through a link.
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    with os.fdopen(fd, "rb") as file:
        while chunk := file.read(HASH_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _unchanged(materialized: Materialized, path: str, info: os.stat_result) -> bool:
    was = materialized.seen.get(path)
    now = (info.st_size, info.st_mtime_ns, info.st_ctime_ns, info.st_ino)
    return was == now and was[2] < materialized.ready_ns


def collect(materialized: Materialized, *, session_id: str, owner_id: int | None) -> Collected:
    """Store what the run changed (blobs linked to the session) and say what it was.

    Steps: list the files (links and special files left out); hash the ones that are new or
    not as they were handed over; check the workspace limit and the owner's quota — over
    either, nothing of this run is kept and the notes say why; store each new content once
    and link it to the session."""
    notes: list[str] = []
    found = _walk(materialized.work, notes)
    if len(found) > MAX_FILES:
        return Collected({}, [], [f"more than {MAX_FILES} files: nothing of this run was kept"])
    changes: dict[str, str | None] = {}
    for path, info in found.items():
        if _unchanged(materialized, path, info):
            continue
        sha256 = _digest(materialized.work / path)
        if materialized.manifest.get(path) != sha256:
            changes[path] = sha256
    for path in materialized.manifest:
        if path not in found:
            changes[path] = None
    total = sum(info.st_size for info in found.values())
    limit = settings.SANDBOX_WORKSPACE_MAX_BYTES
    if total > limit:
        return Collected(
            {},
            [],
            notes
            + [
                f"the workspace would hold {total} bytes, more than SANDBOX_WORKSPACE_MAX_BYTES "
                f"({limit}): nothing of this run was kept"
            ],
        )
    added = {sha256: found[path].st_size for path, sha256 in changes.items() if sha256}
    if added and owner_id is not None:
        new = set(added) - owner_links_many(owner_id=owner_id, sha256s=list(added))
        extra = sum(added[sha256] for sha256 in new)
        used = owner_usage(owner_id)
        if extra and used + extra > settings.USER_STORAGE_QUOTA_BYTES:
            return Collected(
                {},
                [],
                notes
                + [
                    f"your files take {used} bytes; this run's {extra} more would pass "
                    f"USER_STORAGE_QUOTA_BYTES ({settings.USER_STORAGE_QUOTA_BYTES}): "
                    "nothing of this run was kept"
                ],
            )
    files = []
    for path, sha256 in sorted(changes.items()):
        if sha256 is None:
            continue
        fd = os.open(materialized.work / path, os.O_RDONLY | os.O_NOFOLLOW)
        with os.fdopen(fd, "rb") as file:
            file_type = workspace_file_type(file, name=path)
            stored = blob_link(
                file=file,
                sha256=sha256,
                size=found[path].st_size,
                file_type=file_type,
                session_id=session_id,
                owner_id=owner_id,
                name=path[-BLOB_NAME_CHARS:],
            )
        files.append(
            workspace_file(path, stored.id, stored.mime, stored.size, stored.width, stored.height)
        )
    return Collected(changes, files, notes)


def workspace_file(
    path: str,
    sha256: str,
    mime: str,
    size: int,
    width: int | None = None,
    height: int | None = None,
) -> dict:
    """A workspace file as results, the API and the page show it."""
    body = {"path": path, "id": sha256, "mime": mime, "size": size}
    return body | ({"width": width, "height": height} if width is not None else {})


def workspace_files(manifest: dict[str, str]) -> list[dict]:
    """The manifest's files, by path, with each blob's type and size."""
    described = blobs_described(set(manifest.values()))
    files = []
    for path, sha256 in sorted(manifest.items()):
        blob = described.get(sha256)
        if blob is not None:
            files.append(
                workspace_file(path, sha256, blob.mime, blob.size, blob.width, blob.height)
            )
    return files


def scratch_remove(scratch: Path) -> None:
    """Remove a run's directory, whatever the program left in it (a directory it made
    unreadable included)."""

    def writable(function, path, _error):
        os.chmod(os.path.dirname(path), 0o700)
        os.chmod(path, 0o700) if os.path.isdir(path) else None
        function(path)

    shutil.rmtree(scratch, onerror=writable)
