"""Reads of a session's workspace for the API (docs/design.md §28): its files as of the
session's latest entry, and one file's bytes. Another user's session, or a path the
workspace does not hold, answers like a missing session (404)."""

from __future__ import annotations

from typing import BinaryIO

from sessions_app.runtime.sandbox.workspace import manifest_as_of, workspace_files
from sessions_app.selectors.files import FileNotFound
from sessions_app.selectors.sessions import session_get
from sessions_app.store import get_store
from sessions_app.store.blobs import StoredFile, blob_open, blobs_described


def _manifest(session_id: str, owner_id: int) -> tuple[dict[str, str], int]:
    session_get(session_id=session_id, owner_id=owner_id)
    return manifest_as_of(get_store().get_messages(session_id))


def workspace_get(*, session_id: str, owner_id: int) -> dict:
    """`{as_of_seq, files: [{path, id, mime, size}]}`: `as_of_seq` is the seq of the entry
    that last changed the workspace (0: it never changed)."""
    manifest, as_of_seq = _manifest(session_id, owner_id)
    files = [
        {key: file[key] for key in ("path", "id", "mime", "size")}
        for file in workspace_files(manifest)
    ]
    return {"as_of_seq": as_of_seq, "files": files}


def workspace_file_open(
    *, session_id: str, owner_id: int, path: str
) -> tuple[StoredFile, BinaryIO]:
    """The workspace file at `path` and its bytes, opened for streaming."""
    manifest, _ = _manifest(session_id, owner_id)
    sha256 = manifest.get(path)
    blob = blobs_described([sha256]).get(sha256) if sha256 else None
    if blob is None:
        raise FileNotFound(path)
    stored = StoredFile(
        id=blob.sha256,
        name=path.rsplit("/", 1)[-1],
        mime=blob.mime,
        size=blob.size,
        kind=blob.kind,
        width=blob.width,
        height=blob.height,
    )
    return stored, blob_open(blob.sha256)
