"""Files in a conversation: upload one to a session (docs/design.md §23).

Every write is a service (docs/design.md §16: one module per action family)."""

from __future__ import annotations

import hashlib
import logging
from pathlib import Path
from typing import Any, BinaryIO

from django.conf import settings

from jarvis_site.shared.errors import Code, DomainError
from sessions_app import selectors
from sessions_app.core import limits
from sessions_app.core.file_types import (
    ImageTooManyPixels,
    UnsupportedFile,
    file_type_of,
    workspace_file_type,
)
from sessions_app.services.sessions import session_locked
from sessions_app.store import SessionNotFound, get_store
from sessions_app.store.blobs import (
    BLOB_NAME_CHARS,
    StoredFile,
    blob_chunks,
    blob_link,
    blobs_of_sessions,
    is_file_id,
    owner_links,
    owner_lock,
    owner_usage,
    session_files,
)
from sessions_app.store.blobs import (
    blobs_sweep as store_blobs_sweep,
)

logger = logging.getLogger(__name__)

NAME_MAX_CHARS = 255
HASH_CHUNK_BYTES = 1024 * 1024


class UploadTooLarge(DomainError, ValueError):
    """A file over UPLOAD_MAX_BYTES (413 too_large)."""

    code = Code.TOO_LARGE


class QuotaExceeded(DomainError, ValueError):
    """The owner's files would take more than USER_STORAGE_QUOTA_BYTES (413 quota_exceeded)."""

    code = Code.QUOTA_EXCEEDED


def upload_too_large() -> UploadTooLarge:
    return UploadTooLarge(f"the file is larger than UPLOAD_MAX_BYTES ({settings.UPLOAD_MAX_BYTES})")


def file_name_check(name: str) -> str:
    """The name a file is shown under: its last path part, at most NAME_MAX_CHARS."""
    name = name.replace("\\", "/").rsplit("/", 1)[-1].strip() or "file"
    limits.storable_check(name, name="the file name")
    return name[:NAME_MAX_CHARS]


def file_upload(
    *, session_id: str, owner_id: int, file: BinaryIO, size: int, name: str
) -> StoredFile:
    """Keep an uploaded file for the caller's session; the same bytes give the same id.

    Steps: check the session is the caller's (SessionNotFound) and the size (UploadTooLarge);
    hash the bytes (their SHA-256 is the id); tell their type from the content
    (UnsupportedFile, ImageTooManyPixels); check the owner's quota, where bytes the owner
    already has cost nothing (QuotaExceeded); store them once and link them to the session
    (store/blobs.py), checking the session and the quota again in the link's transaction
    (`_link_check`).
    """
    meta = selectors.session_get(session_id=session_id, owner_id=owner_id)
    if size > settings.UPLOAD_MAX_BYTES:
        raise upload_too_large()
    name = file_name_check(name)
    digest = hashlib.sha256()
    file.seek(0)
    while chunk := file.read(HASH_CHUNK_BYTES):
        digest.update(chunk)
    sha256 = digest.hexdigest()
    file_type = file_type_of(file)
    # A first look, before the bytes are written: most refusals cost no write.
    _quota_check(owner_id=owner_id, sha256=sha256, size=size)

    def _link_check() -> None:
        """Run in the link's transaction, before the link is made. The session's lock is the
        one `session_delete` holds while it removes the session's links: a delete that came
        first leaves no session here (nothing is linked to its id for whoever makes it
        next), one that comes second waits and removes this link with the others. The
        owner's row lock then makes uploads of one person check and charge the quota one at
        a time."""
        with session_locked(session_id, agent=meta.agent, owner_id=owner_id):
            current = get_store().get_meta(session_id)
        if current is None or current.owner_id != owner_id:
            raise SessionNotFound(session_id)
        owner_lock(owner_id)
        _quota_check(owner_id=owner_id, sha256=sha256, size=size)

    return blob_link(
        file=file,
        sha256=sha256,
        size=size,
        file_type=file_type,
        session_id=session_id,
        owner_id=owner_id,
        name=name,
        check=_link_check,
    )


def _quota_check(*, owner_id: int, sha256: str, size: int) -> None:
    if owner_links(owner_id=owner_id, sha256=sha256):
        return  # bytes the owner already has cost nothing
    used = owner_usage(owner_id)
    if used + size > settings.USER_STORAGE_QUOTA_BYTES:
        raise QuotaExceeded(
            f"your files take {used} bytes; this one ({size} bytes) would pass "
            f"USER_STORAGE_QUOTA_BYTES ({settings.USER_STORAGE_QUOTA_BYTES})"
        )


class AttachmentUnknown(DomainError, LookupError):
    """A prompt's attachment that is no file of its session (404 unknown_attachment: the
    file named is not there, as a missing session is 404)."""

    code = Code.UNKNOWN_ATTACHMENT


class AttachmentsNotSteered(limits.InputInvalid):
    """A steer joins the running turn as text only: attachments go with a prompt that runs
    as a turn of its own (400 invalid)."""

    def __init__(self):
        super().__init__(
            "attachments go with a prompt of its own (mode reject, queue or interrupt), not a steer"
        )


ATTACHMENTS_MAX = 20


def attachments_for_prompt(*, session_id: str, file_ids: Any) -> list[dict]:
    """What a user message keeps of its attachments (`data.attachments`: id, name, mime,
    size, and an image's width and height), in the order given, each once; refused whole
    when one is not a file uploaded to this session (or the list is not one of ids).

    The caller has checked the session is the sender's."""
    if file_ids is None:
        return []
    if not isinstance(file_ids, list) or not all(isinstance(item, str) for item in file_ids):
        raise limits.InputInvalid("attachments must be a list of file ids")
    if len(file_ids) > ATTACHMENTS_MAX:
        raise limits.InputInvalid(f"a prompt takes at most {ATTACHMENTS_MAX} attachments")
    wanted = list(dict.fromkeys(file_ids))
    found = session_files(session_id=session_id, file_ids=wanted)
    missing = [file_id for file_id in wanted if file_id not in found]
    if missing:
        raise AttachmentUnknown(
            f"no file {missing[0][:64]!r} was uploaded to this session "
            "(POST /api/sessions/<id>/files/ first)"
        )
    return [found[file_id].attachment() for file_id in wanted]


def blobs_sweep() -> int:
    """Remove every blob no session links to (file and row); how many went. A blob an upload
    links while the sweep runs stays, or is written again by that upload (store/blobs.py)."""
    removed = store_blobs_sweep()
    if removed:
        logger.info("blobs sweep removed %d unlinked blob(s)", removed)
    return removed


def files_export(*, session_ids: list[str], directory: Path) -> int:
    """Copy the files these sessions link to into `directory/<sha256>` (an existing one is
    the same bytes and stays); how many the directory holds for them."""
    wanted = blobs_of_sessions(session_ids)
    if wanted:
        directory.mkdir(parents=True, exist_ok=True)
    for sha256 in wanted:
        target = directory / sha256
        if target.exists():
            continue
        partial = directory / f".{sha256}.partial"
        with partial.open("wb") as out:
            for chunk in blob_chunks(sha256, HASH_CHUNK_BYTES):
                out.write(chunk)
        partial.replace(target)
    return len(wanted)


def files_restore(
    *, session_id: str, owner_id: int, refs: list[dict], directory: Path
) -> list[str]:
    """Link an imported session to the files its messages name, from `directory/<sha256>`
    (an export's `files/`); notes on the ones that could not be: missing, or not the bytes
    their id says, or not a file an upload would take."""
    notes = []
    for ref in refs:
        sha256 = str(ref.get("id", ""))
        path = directory / sha256
        if not is_file_id(sha256) or not path.is_file():
            notes.append(f"file {sha256[:64]!r} ({ref.get('name', '')}) is not in the export")
            continue
        with path.open("rb") as file:
            digest = hashlib.sha256()
            while chunk := file.read(HASH_CHUNK_BYTES):
                digest.update(chunk)
            if digest.hexdigest() != sha256:
                notes.append(f"file {sha256} does not hold the bytes its name says; left out")
                continue
            name = str(ref.get("name") or "file")
            try:
                if ref.get("workspace"):
                    # A file a sandbox run wrote: kept whatever its type, as the run kept it.
                    file_type = workspace_file_type(file, name=name)
                    name = name[-BLOB_NAME_CHARS:]
                else:
                    file_type = file_type_of(file)
                    name = file_name_check(name)
            except (UnsupportedFile, ImageTooManyPixels) as error:
                notes.append(f"file {sha256}: {error}; left out")
                continue
            blob_link(
                file=file,
                sha256=sha256,
                size=path.stat().st_size,
                file_type=file_type,
                session_id=session_id,
                owner_id=owner_id,
                name=name,
            )
    return notes
