"""Reads of a session's files for the API (docs/design.md §23): another user's session, or
a file the session does not have, answers like a missing session (404)."""

from __future__ import annotations

from typing import BinaryIO

from jarvis_site.shared.errors import Code, DomainError
from sessions_app.core.file_types import thumbnail_png
from sessions_app.models import Blob
from sessions_app.selectors.sessions import session_get
from sessions_app.store.blobs import (  # noqa: F401 - blob_chunks, blobs_of_sessions: exports
    StoredFile,
    blob_chunks,
    blob_open,
    blob_thumbnail,
    blobs_of_sessions,
    session_file,
)


class FileNotFound(DomainError, LookupError):
    """No such file in the caller's session (404 not_found)."""

    code = Code.NOT_FOUND

    def __init__(self, file_id: str):
        super().__init__(f"no file {file_id[:64]!r} in this session")


def file_get(*, session_id: str, owner_id: int, file_id: str) -> StoredFile:
    session_get(session_id=session_id, owner_id=owner_id)
    stored = session_file(session_id=session_id, file_id=file_id)
    if stored is None:
        raise FileNotFound(file_id)
    return stored


def file_open(*, session_id: str, owner_id: int, file_id: str) -> tuple[StoredFile, BinaryIO]:
    """The file and its bytes, opened for streaming."""
    stored = file_get(session_id=session_id, owner_id=owner_id, file_id=file_id)
    return stored, blob_open(stored.id)


def file_thumbnail(*, session_id: str, owner_id: int, file_id: str) -> bytes:
    """A PNG of the image at most 256 px on its longer side, made once (store/blobs.py);
    FileNotFound for a file that is no image, NoPreview for one too large to scale."""
    stored = file_get(session_id=session_id, owner_id=owner_id, file_id=file_id)
    if stored.kind != Blob.IMAGE:
        raise FileNotFound(file_id)
    return blob_thumbnail(stored.id, thumbnail_png)
