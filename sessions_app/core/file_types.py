"""What an uploaded file is, read from its bytes alone (docs/design.md §23).

Never from its name or the type its sender declared: a program named `photo.png` is not an
image. Images (PNG, JPEG, GIF, WebP) are what Pillow opens as one of those formats, within
Pillow's decompression-bomb limit; text is valid UTF-8 without NUL; a PDF is what `pypdf`
reads, and its text is what a model is sent. Everything else is `unsupported_file`.
Each check reads the file once, front to back: its cost is linear in its size. What decodes
more than a header — a PDF's text, a scaled image — runs in a bounded child process
(core/file_readers.py; docs/design.md §27).
"""

from __future__ import annotations

import codecs
import json
import mimetypes
import warnings
from dataclasses import dataclass
from typing import BinaryIO

from django.conf import settings
from PIL import Image, UnidentifiedImageError

from jarvis_site.shared.bounded import Limits, run_bounded
from jarvis_site.shared.errors import Code, DomainError

# Pillow's names of the formats a model can be shown, and the type each is sent as.
IMAGE_FORMATS = {"PNG": "image/png", "JPEG": "image/jpeg", "GIF": "image/gif", "WEBP": "image/webp"}
PDF_MAGIC = b"%PDF-"
# A PDF's text is read from at most this many pages: a model is sent a bounded part anyway
# (runtime/context/attachments.py), and a page count is the budget before the work.
PDF_MAX_PAGES = 500
THUMB_MAX_PX = 256
# Text a file's name may say it is, beside text/*.
TEXT_TYPES = {"application/json", "application/xml", "application/javascript", "application/x-sh"}
TEXT_CHUNK_BYTES = 1024 * 1024


class UnsupportedFile(DomainError, ValueError):
    """Not an image, a text or a PDF (415 unsupported_file)."""

    code = Code.UNSUPPORTED_FILE


class ImageTooManyPixels(DomainError, ValueError):
    """An image over Pillow's decompression-bomb limit (400 image_too_large)."""

    code = Code.IMAGE_TOO_LARGE


@dataclass(frozen=True)
class FileType:
    kind: str  # image | text | pdf (models.Blob.KINDS)
    mime: str
    width: int | None = None
    height: int | None = None
    # A PDF's text, read once at upload and kept beside its bytes.
    text: str | None = None


def file_type_of(file: BinaryIO) -> FileType:
    """The type of the file's content (read from its start); UnsupportedFile or
    ImageTooManyPixels when it cannot be kept."""
    file.seek(0)
    head = file.read(len(PDF_MAGIC))
    file.seek(0)
    if head == PDF_MAGIC:
        return _pdf(file)
    image = _image(file)
    if image is not None:
        return image
    file.seek(0)
    if _is_text(file):
        return FileType(kind="text", mime="text/plain")
    raise UnsupportedFile("the file is not an image (PNG, JPEG, GIF, WebP), a text or a PDF")


def workspace_file_type(file: BinaryIO, *, name: str) -> FileType:
    """The type of a file a sandbox run wrote (docs/design.md §28): an image or a text as an
    upload's would be, anything else kept as data typed by its name. A PDF is not parsed
    here: its text is read only when a person uploads one."""
    file.seek(0)
    try:
        image = _image(file)
    except ImageTooManyPixels:
        image = None
    if image is not None:
        return image
    guessed = mimetypes.guess_type(name)[0] or ""
    file.seek(0)
    if guessed != "application/pdf" and _is_text(file):
        textual = guessed.startswith("text/") or guessed in TEXT_TYPES
        return FileType(kind="text", mime=guessed if textual else "text/plain")
    return FileType(kind="data", mime=guessed or "application/octet-stream")


def _image(file: BinaryIO) -> FileType | None:
    try:
        with warnings.catch_warnings():
            # Over MAX_IMAGE_PIXELS Pillow only warns (over twice that it raises): both are
            # refused here, before a pixel is decoded.
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            with Image.open(file) as image:
                if image.format not in IMAGE_FORMATS:
                    return None
                return FileType(
                    kind="image",
                    mime=IMAGE_FORMATS[image.format],
                    width=image.width,
                    height=image.height,
                )
    except (Image.DecompressionBombWarning, Image.DecompressionBombError) as error:
        raise ImageTooManyPixels(
            f"the image has more pixels than the limit of {Image.MAX_IMAGE_PIXELS}"
        ) from error
    except (UnidentifiedImageError, OSError, ValueError, SyntaxError):
        return None


def _is_text(file: BinaryIO) -> bool:
    """Valid UTF-8 without NUL, read a chunk at a time (a character may span two chunks)."""
    decode = codecs.getincrementaldecoder("utf-8")()
    while chunk := file.read(TEXT_CHUNK_BYTES):
        if b"\x00" in chunk:
            return False
        try:
            decode.decode(chunk)
        except UnicodeDecodeError:
            return False
    try:
        decode.decode(b"", final=True)
    except UnicodeDecodeError:
        return False
    return True


def file_read_limits() -> Limits:
    return Limits(
        cpu_sec=settings.FILE_READ_CPU_SEC,
        wall_sec=settings.FILE_READ_WALL_SEC,
        memory_bytes=settings.FILE_READ_MEMORY_MB * 1024 * 1024,
    )


def _pdf(file: BinaryIO) -> FileType:
    """The PDF's text, read page by page in a bounded child (core/file_readers.py): a PDF
    that takes longer than its limits keeps the pages read by then, and one that gave no
    page by then is refused."""
    result = run_bounded(
        "sessions_app.core.file_readers:pdf_pages_text",
        file.read(),
        file_read_limits(),
        max_pages=PDF_MAX_PAGES,
    )
    if result.stopped == "error":
        raise UnsupportedFile(result.error.removeprefix("SystemExit: "))
    pages = [
        json.loads(line) for line in result.output.splitlines(keepends=True) if line[-1:] == b"\n"
    ]
    if result.stopped is not None:
        if not pages:
            raise UnsupportedFile(
                f"the PDF could not be read within the limits (FILE_READ_CPU_SEC, "
                f"FILE_READ_WALL_SEC, FILE_READ_MEMORY_MB): {LIMIT_WORDS[result.stopped]}"
            )
        pages.append(f"[the rest of the PDF was not read: {LIMIT_WORDS[result.stopped]}]")
    return FileType(kind="pdf", mime="application/pdf", text="\n\n".join(pages))


LIMIT_WORDS = {
    "cpu": "it took too much CPU time",
    "wall": "it took too long",
    "memory": "it took too much memory",
}


class NoPreview(DomainError, LookupError):
    """An image too large (or too odd) to scale within the limits (404 not_found)."""

    code = Code.NOT_FOUND


def image_scaled(data: bytes, *, max_px: int, jpeg_quality: int = 0) -> bytes:
    """The image at most `max_px` on its longer side (PNG, or JPEG with `jpeg_quality` for
    an opaque one), made in a bounded child (core/file_readers.py); NoPreview when it
    cannot be within THUMB_DECODE_MAX_BYTES and the read limits."""
    result = run_bounded(
        "sessions_app.core.file_readers:image_scaled",
        data,
        file_read_limits(),
        max_px=max_px,
        decode_max_bytes=settings.THUMB_DECODE_MAX_BYTES,
        jpeg_quality=jpeg_quality,
    )
    if result.stopped is not None or not result.output:
        why = result.error.removeprefix("SystemExit: ") or LIMIT_WORDS.get(result.stopped, "")
        raise NoPreview(f"the image cannot be scaled: {why}")
    return result.output


def thumbnail_png(data: bytes) -> bytes:
    """A PNG of the image at most THUMB_MAX_PX on its longer side (its first frame)."""
    return image_scaled(data, max_px=THUMB_MAX_PX)
