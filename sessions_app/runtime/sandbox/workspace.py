"""A session's workspace: a manifest `{path: sha256}` of content-addressed blobs (§23's store).

The manifest is kept in the session's entries: the result entry of each run that changed
something holds `data.workspace` — `{path: sha256}` for files it created or changed, `{path:
null}` for files it removed — so the workspace as of seq N is those changes folded in seq
order up to N. A branch, an edit or a regenerate copies the entries up to its cut and has
the workspace as it was there; a delete removes them; an export carries them; on every store
backend alike. Each blob is also linked to the session (a `BlobLink` named by its path):
that keeps it from `blobs_sweep`, counts it in the owner's quota and puts it in exports.

A run hands the manifest's blobs to the sandbox (pack.py: one stream into the run's own
`/workspace`, a tmpfs; the session's attachments read-only in `attachments/`, copied into
the run's scratch directory), runs, gets back what changed and stores it (`collect`); then
the scratch directory goes. No worker keeps a session's files between runs.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings

from sessions_app.core.file_types import workspace_file_type
from sessions_app.runtime.sandbox import inside
from sessions_app.runtime.sandbox.base import HandedFile
from sessions_app.runtime.sandbox.pack import Returned
from sessions_app.runtime.sandbox.paths import ATTACHMENTS, MAX_FILES, path_valid
from sessions_app.store.base import EntryRecord
from sessions_app.store.blobs import (
    BLOB_NAME_CHARS,
    blob_link,
    blob_local_path,
    blob_open,
    blob_sizes,
    blobs_described,
    owner_links_many,
    owner_usage,
)

HASH_CHUNK = 1024 * 1024


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


def scratch_prepare(scratch: Path) -> Path:
    """The run's scratch directory made reachable by the sandbox's user, with `attachments/`
    (bound read-only at /workspace/attachments); the backend adds `code/`. Returns
    `attachments/`."""
    scratch.chmod(0o755)  # made private (mkdtemp): the sandbox's user must reach into it
    attachments = scratch / ATTACHMENTS
    attachments.mkdir(mode=0o755)
    return attachments


def attachments_copy(scratch: Path, attachments: dict[str, str]) -> Path:
    """The session's attachments, read-only, in the run's `attachments/`."""
    directory = scratch_prepare(scratch)
    for name, sha256 in attachments.items():
        target = directory / name
        _copy_blob(sha256, str(target))
        target.chmod(0o444)
    return directory


def handed_files(manifest: dict[str, str]) -> dict[str, HandedFile]:
    """The manifest as a run gets it: each valid path with its blob and the blob's size."""
    sizes = blob_sizes(set(manifest.values()))
    return {
        path: HandedFile(sha256, sizes[sha256])
        for path, sha256 in manifest.items()
        if path_valid(path) and sha256 in sizes
    }


def _copy_blob(sha256: str, target: str) -> None:
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
    finally:
        os.close(out)


@dataclass
class Collected:
    changes: dict[str, str | None]  # {path: sha256 | None}
    files: list[dict]  # created or changed: {path, id, mime, size} (+ width, height)
    notes: list[str]  # what was not kept, and why (the result's stderr says it)


def _nothing_kept(notes: list[str], why: str) -> Collected:
    return Collected({}, [], [*notes, f"{why}: nothing of this run was kept"])


def collect(
    returned: Returned,
    handed: dict[str, HandedFile],
    *,
    session_id: str,
    owner_id: int | None,
) -> Collected:
    """Store what the run changed (blobs linked to the session) and say what it was.

    `returned` is what the sandbox sent back (pack.read_pack: paths checked, files hashed).
    Steps: what changed against what was handed in; check the workspace limit and the
    owner's quota — over either, or when the run filled its /workspace (a write of its
    failed, so a file may be cut short), nothing of this run is kept and the notes say why;
    store each new content once and link it to the session."""
    notes = list(returned.notes)
    limit = settings.SANDBOX_WORKSPACE_MAX_BYTES
    if returned.full_tmp:
        notes.append(
            f"/tmp filled its SANDBOX_TMP_MAX_BYTES ({settings.SANDBOX_TMP_MAX_BYTES} bytes): "
            "writes past it failed"
        )
    if returned.lost is not None:
        return Collected({}, [], [*notes, returned.lost])
    if returned.too_many:
        return _nothing_kept(
            notes, f"more than {MAX_FILES} files (or {inside.MAX_ENTRIES} names in all)"
        )
    if returned.full_workspace:
        return _nothing_kept(
            notes,
            f"the run filled its workspace (SANDBOX_WORKSPACE_MAX_BYTES, {limit} bytes) and "
            "writes past it failed",
        )
    changes: dict[str, str | None] = {}
    for path, file in returned.files.items():
        was = handed.get(path)
        if was is None or was.sha256 != file.sha256:
            changes[path] = file.sha256
    for path in handed:
        if path not in returned.files and path not in returned.unchanged:
            changes[path] = None
    total = sum(file.size for file in returned.files.values()) + sum(
        handed[path].size for path in returned.unchanged
    )
    if total > limit:
        return _nothing_kept(
            notes,
            f"the workspace would hold {total} bytes, more than SANDBOX_WORKSPACE_MAX_BYTES "
            f"({limit})",
        )
    added = {sha256: returned.files[path].size for path, sha256 in changes.items() if sha256}
    if added and owner_id is not None:
        new = set(added) - owner_links_many(owner_id=owner_id, sha256s=list(added))
        extra = sum(added[sha256] for sha256 in new)
        used = owner_usage(owner_id)
        if extra and used + extra > settings.USER_STORAGE_QUOTA_BYTES:
            return _nothing_kept(
                notes,
                f"your files take {used} bytes; this run's {extra} more would pass "
                f"USER_STORAGE_QUOTA_BYTES ({settings.USER_STORAGE_QUOTA_BYTES})",
            )
    files = []
    for path, sha256 in sorted(changes.items()):
        if sha256 is None:
            continue
        file = returned.files[path]
        file_type = workspace_file_type(file.file, name=path)
        stored = blob_link(
            file=file.file,
            sha256=sha256,
            size=file.size,
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
