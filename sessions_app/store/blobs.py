"""The blob store: uploaded files' bytes, once each by their SHA-256 (docs/design.md §23).

Bytes go through Django's storage API (`STORAGES["blobs"]`) at `ab/cd/<sha256>`; a PDF's
text read at upload sits beside them at `ab/cd/<sha256>.txt`, and an image's thumbnail, made
on its first request, at `ab/cd/<sha256>.thumb.png`. Rows: a `Blob` per distinct
content and a `BlobLink` per (session, blob) — the file uploaded to that session.

Linking and sweeping meet on the blob's row lock. `blob_link` stores the file, then under
the row's lock makes sure the row, its link and the file all exist (writing the file again
if a sweep removed it meanwhile); `blobs_sweep` takes the same lock, looks for links in a
statement of its own (so it sees every link committed before it got the lock), and only
then removes the file and the row. Whichever comes second sees what the first did. On
SQLite every write transaction is IMMEDIATE, which serializes the two the same way.
"""

from __future__ import annotations

import io
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import BinaryIO

from django.contrib.auth import get_user_model
from django.core.files import File
from django.core.files.base import ContentFile
from django.core.files.storage import storages
from django.db import IntegrityError, transaction
from django.db.models import Sum
from django.utils import timezone

from sessions_app.core.file_types import FileType
from sessions_app.models import Blob, BlobLink

# A file's id is the SHA-256 of its bytes in lowercase hex; anything else names no file. Checked
# before a query: PostgreSQL refuses a NUL in a string parameter outright (a 500, not a 404).
FILE_ID = re.compile("[0-9a-f]{64}")


def is_file_id(file_id: str) -> bool:
    return FILE_ID.fullmatch(file_id) is not None


# The longest name a link keeps (models.BlobLink.name); a longer workspace path keeps its end.
BLOB_NAME_CHARS = 255


@dataclass(frozen=True)
class StoredFile:
    """A file of a session, as the API and the projection see it."""

    id: str
    name: str
    mime: str
    size: int
    kind: str
    width: int | None = None
    height: int | None = None

    def to_api(self) -> dict:
        body = {"id": self.id, "name": self.name, "mime": self.mime, "size": self.size}
        if self.width is not None:
            body |= {"width": self.width, "height": self.height}
        return body

    def attachment(self) -> dict:
        """What a user message keeps of it (`data.attachments`): never the bytes."""
        ref = {"id": self.id, "name": self.name, "mime": self.mime, "size": self.size}
        if self.width is not None:
            ref |= {"width": self.width, "height": self.height}
        return ref


def blob_storage():
    return storages["blobs"]


def blob_name(sha256: str) -> str:
    return f"{sha256[:2]}/{sha256[2:4]}/{sha256}"


def text_name(sha256: str) -> str:
    return blob_name(sha256) + ".txt"


def thumb_name(sha256: str) -> str:
    return blob_name(sha256) + ".thumb.png"


def _stored(link: BlobLink) -> StoredFile:
    blob = link.blob
    return StoredFile(
        id=blob.sha256,
        name=link.name,
        mime=blob.mime,
        size=blob.size,
        kind=blob.kind,
        width=blob.width,
        height=blob.height,
    )


def owner_usage(owner_id: int | None) -> int:
    """Bytes of the distinct blobs the owner's sessions link to (what the quota counts)."""
    if owner_id is None:
        return 0
    total = Blob.objects.filter(
        sha256__in=BlobLink.objects.filter(owner_id=owner_id).values("blob_id")
    ).aggregate(total=Sum("size"))["total"]
    return int(total or 0)


def owner_lock(owner_id: int) -> None:
    """Lock the owner's user row until the transaction ends (a quota's check and charge)."""
    list(get_user_model().objects.select_for_update().filter(pk=owner_id).values_list("pk"))


def owner_links(*, owner_id: int | None, sha256: str) -> bool:
    """Whether the owner already has this blob (an upload of it again costs no quota)."""
    return BlobLink.objects.filter(owner_id=owner_id, blob_id=sha256).exists()


def owner_links_many(*, owner_id: int, sha256s: list[str]) -> set[str]:
    """Which of these blobs the owner already has (storing them again costs no quota)."""
    return set(
        BlobLink.objects.filter(owner_id=owner_id, blob_id__in=sha256s).values_list(
            "blob_id", flat=True
        )
    )


def blobs_described(sha256s: Iterable[str]) -> dict[str, Blob]:
    """The rows of these blobs (type, size, an image's size), by id; missing ones left out."""
    return {blob.sha256: blob for blob in Blob.objects.filter(sha256__in=list(sha256s))}


def blob_sizes(sha256s: Iterable[str]) -> dict[str, int]:
    """The sizes of these blobs, by id; missing ones left out (no rows built: a sandbox run
    asks for every file of its workspace)."""
    rows = Blob.objects.filter(sha256__in=list(sha256s)).values_list("sha256", "size")
    return dict(rows)


def _put(storage, name: str, content: BinaryIO | str) -> None:
    """Write `content` at `name` unless a file is there. When two writers race for one, a
    directory picks another name for the second (the same bytes, dropped) and a bucket
    overwrites the object with the same bytes. Only the storage API is used, no local path:
    the same code serves a directory and an S3 bucket."""
    if storage.exists(name):
        return
    if isinstance(content, str):
        saved = storage.save(name, ContentFile(content.encode("utf-8")))
    else:
        content.seek(0)
        saved = storage.save(name, File(content))
    if saved != name:
        storage.delete(saved)


def blob_link(
    *,
    file: BinaryIO,
    sha256: str,
    size: int,
    file_type: FileType,
    session_id: str,
    owner_id: int | None,
    name: str,
    check: Callable[[], None] | None = None,
) -> StoredFile:
    """Store the bytes (once) and link them to the session; the file as the session has it.

    Steps: write the file (and a PDF's text) unless already there — outside any lock, as the
    write may be slow; then in one transaction run `check` (the caller's last word, under
    the locks it takes: it raises to refuse), lock the blob's row (or create it), link it
    to the session (the first name stays), and write the file again if a concurrent sweep
    removed it before the lock was ours.
    """
    storage = blob_storage()
    _put(storage, blob_name(sha256), file)
    if file_type.text is not None:
        _put(storage, text_name(sha256), file_type.text)
    with transaction.atomic():
        if check is not None:
            check()
        blob = _blob_locked(sha256, size=size, file_type=file_type)
        link, _ = BlobLink.objects.get_or_create(
            session_id=session_id,
            blob=blob,
            defaults={"owner_id": owner_id, "name": name, "created_at": timezone.now()},
        )
        # The lock is ours: no sweep removes the file until this commits with its link.
        _put(storage, blob_name(sha256), file)
        if file_type.text is not None:
            _put(storage, text_name(sha256), file_type.text)
    return _stored(link)


def _blob_locked(sha256: str, *, size: int, file_type: FileType) -> Blob:
    """The blob's row, locked until the transaction ends; created when there is none."""
    blob = Blob.objects.select_for_update().filter(sha256=sha256).first()
    if blob is not None:
        return blob
    try:
        with transaction.atomic():
            return Blob.objects.create(
                sha256=sha256,
                size=size,
                mime=file_type.mime,
                kind=file_type.kind,
                width=file_type.width,
                height=file_type.height,
                created_at=timezone.now(),
            )
    except IntegrityError:
        # Another upload of the same bytes created it first; wait for its lock.
        return Blob.objects.select_for_update().get(sha256=sha256)


def session_file(*, session_id: str, file_id: str) -> StoredFile | None:
    if not is_file_id(file_id):
        return None
    link = (
        BlobLink.objects.select_related("blob")
        .filter(session_id=session_id, blob_id=file_id)
        .first()
    )
    return None if link is None else _stored(link)


def session_files(*, session_id: str, file_ids: Iterable[str]) -> dict[str, StoredFile]:
    """The session's files among `file_ids`, by id (ids it has no file for are left out)."""
    links = BlobLink.objects.select_related("blob").filter(
        session_id=session_id, blob_id__in=[file_id for file_id in file_ids if is_file_id(file_id)]
    )
    return {link.blob_id: _stored(link) for link in links}


def blob_open(sha256: str) -> BinaryIO:
    return blob_storage().open(blob_name(sha256), "rb")


def blob_thumbnail(sha256: str, make: Callable[[bytes], bytes]) -> bytes:
    """The image's thumbnail: made once by `make` from its bytes, then kept beside them, so
    a second request decodes nothing. Two first requests at once may both make it; the
    second write is dropped (`_put`)."""
    storage = blob_storage()
    name = thumb_name(sha256)
    if storage.exists(name):
        with storage.open(name, "rb") as kept:
            return kept.read()
    png = make(blob_read(sha256))
    _put(storage, name, io.BytesIO(png))
    return png


def blob_local_path(sha256: str) -> str | None:
    """The blob's file on this machine's disk, when the storage is a directory (None for a
    bucket): a sandbox run copies it with one system call instead of through a stream."""
    try:
        return blob_storage().path(blob_name(sha256))
    except NotImplementedError:
        return None


def blob_read(sha256: str) -> bytes:
    with blob_open(sha256) as file:
        return file.read()


def blob_text(sha256: str, *, kind: str) -> str:
    """The text a model is sent of a text file or a PDF."""
    name = text_name(sha256) if kind == Blob.PDF else blob_name(sha256)
    with blob_storage().open(name, "rb") as file:
        return file.read().decode("utf-8", "replace")


def blob_links_copy(*, source_id: str, new_id: str) -> int:
    """A branch shares its parent's files: each link copied (same blobs, no bytes copied)."""
    now = timezone.now()
    links = [
        BlobLink(
            blob_id=link.blob_id,
            session_id=new_id,
            owner_id=link.owner_id,
            name=link.name,
            created_at=now,
        )
        for link in BlobLink.objects.filter(session_id=source_id)
    ]
    BlobLink.objects.bulk_create(links, ignore_conflicts=True)
    return len(links)


def blob_links_remove(*, session_id: str) -> int:
    """The session's links go with it; blobs nothing links to then wait for the sweep."""
    removed, _ = BlobLink.objects.filter(session_id=session_id).delete()
    return removed


def blobs_unlinked() -> list[str]:
    return list(Blob.objects.filter(links__isnull=True).values_list("sha256", flat=True))


def blob_remove_if_unlinked(sha256: str) -> bool:
    """Remove the blob (file, text, row) when nothing links to it; whether it went.

    The file goes while the row's lock is held, before the row: an upload linking the same
    bytes waits for the lock, finds no row, creates it and writes the file again."""
    storage = blob_storage()
    with transaction.atomic():
        blob = Blob.objects.select_for_update().filter(sha256=sha256).first()
        if blob is None or BlobLink.objects.filter(blob_id=sha256).exists():
            return False
        storage.delete(blob_name(sha256))
        storage.delete(text_name(sha256))
        storage.delete(thumb_name(sha256))
        blob.delete()
    return True


def blobs_sweep() -> int:
    """Remove every blob nothing links to; how many went."""
    return sum(blob_remove_if_unlinked(sha256) for sha256 in blobs_unlinked())


def blobs_of_sessions(session_ids: Iterable[str]) -> list[str]:
    """The distinct blobs these sessions link to, in id order (what an export carries)."""
    return list(
        BlobLink.objects.filter(session_id__in=list(session_ids))
        .values_list("blob_id", flat=True)
        .distinct()
        .order_by("blob_id")
    )


def blob_chunks(sha256: str, chunk_bytes: int) -> Iterable[bytes]:
    """The blob's bytes, a chunk at a time (an export streams them, never whole)."""
    with blob_open(sha256) as file:
        while chunk := file.read(chunk_bytes):
            yield chunk
