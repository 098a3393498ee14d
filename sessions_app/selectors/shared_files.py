"""The files a share link shows (docs/design.md §24, files §23): anyone holding a live token
reads a file, or its thumbnail, only when it is attached to a user message the share shows.

Any other id — a file of the session never attached, one attached after the link's
`upto_seq`, another session's — answers exactly as an unknown, revoked or expired token."""

from __future__ import annotations

from typing import BinaryIO

from sessions_app.core.file_types import NoPreview, thumbnail_png
from sessions_app.models import Blob
from sessions_app.selectors.shares import (
    ShareNotFound,
    share_resolve,
    shared_attachments,
    shared_entries,
)
from sessions_app.store.blobs import StoredFile, blob_open, blob_thumbnail, session_file


def shared_file_get(*, token: str, file_id: str) -> StoredFile:
    share, _ = share_resolve(token)
    shown = {ref["id"] for entry in shared_entries(share) for ref in shared_attachments(entry)}
    if file_id not in shown:
        raise ShareNotFound()
    # Still linked to the session: the bytes of a file the session no longer has are gone.
    stored = session_file(session_id=share.session_id, file_id=file_id)
    if stored is None:
        raise ShareNotFound()
    return stored


def shared_file_open(*, token: str, file_id: str) -> tuple[StoredFile, BinaryIO]:
    """The shown file and its bytes, opened for streaming."""
    stored = shared_file_get(token=token, file_id=file_id)
    return stored, blob_open(stored.id)


def shared_file_thumbnail(*, token: str, file_id: str) -> bytes:
    """A PNG of a shown image at most 256 px on its longer side; ShareNotFound for a file
    that is no image."""
    stored = shared_file_get(token=token, file_id=file_id)
    if stored.kind != Blob.IMAGE:
        raise ShareNotFound()
    try:
        return blob_thumbnail(stored.id, thumbnail_png)
    except NoPreview:
        raise ShareNotFound() from None
