"""What an uploaded file is, read from its bytes alone (docs/design.md §23).

Never from its name or the type its sender declared: a program named `photo.png` is not an
image. Images (PNG, JPEG, GIF, WebP) are what Pillow opens as one of those formats, within
Pillow's decompression-bomb limit; text is valid UTF-8 without NUL; a PDF is what `pypdf`
reads, and its text is what a model is sent. Everything else is `unsupported_file`.
Each check reads the file once, front to back: its cost is linear in its size.
"""

from __future__ import annotations

import codecs
import io
import warnings
from dataclasses import dataclass
from typing import BinaryIO

from PIL import Image, UnidentifiedImageError
from pypdf import PdfReader
from pypdf.errors import PyPdfError

from jarvis_site.shared.errors import Code, DomainError

# Pillow's names of the formats a model can be shown, and the type each is sent as.
IMAGE_FORMATS = {"PNG": "image/png", "JPEG": "image/jpeg", "GIF": "image/gif", "WEBP": "image/webp"}
PDF_MAGIC = b"%PDF-"
# A PDF's text is read from at most this many pages: a model is sent a bounded part anyway
# (runtime/context/attachments.py), and a page count is the budget before the work.
PDF_MAX_PAGES = 500
THUMB_MAX_PX = 256
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


def _pdf(file: BinaryIO) -> FileType:
    try:
        reader = PdfReader(file)
        pages = reader.pages[:PDF_MAX_PAGES]
        text = "\n\n".join((page.extract_text() or "").strip() for page in pages)
    except (PyPdfError, ValueError, KeyError, TypeError, OSError, RecursionError) as error:
        raise UnsupportedFile(f"the PDF could not be read: {error}") from error
    return FileType(kind="pdf", mime="application/pdf", text=text.replace("\x00", ""))


def thumbnail_png(file: BinaryIO) -> bytes:
    """A PNG of the image at most THUMB_MAX_PX on its longer side (its first frame)."""
    with Image.open(file) as image:
        image.draft("RGB", (THUMB_MAX_PX, THUMB_MAX_PX))  # JPEG: decode at a smaller scale
        image.seek(0)
        frame = image.convert("RGBA")
        frame.thumbnail((THUMB_MAX_PX, THUMB_MAX_PX))
        out = io.BytesIO()
        frame.save(out, format="PNG")
        return out.getvalue()
