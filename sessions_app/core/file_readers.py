"""Readers of uploaded files that run in a bounded child process (jarvis_site/shared/
bounded.py; docs/design.md §27), never in a server process: a PDF's text and a scaled copy
of an image. Each is `reader(data, out, **params)`: the file's bytes in, what it read written
to `out`; a file it cannot read ends the process with a one-line reason (SystemExit).

Only Pillow and pypdf are imported here: the child starts without Django.
"""

from __future__ import annotations

import io
import json
import warnings
from typing import BinaryIO

from PIL import Image
from pypdf import PdfReader
from pypdf.errors import PyPdfError

PDF_ERRORS = (PyPdfError, ValueError, KeyError, TypeError, OSError, RecursionError)


def pdf_pages_text(data: bytes, out: BinaryIO, *, max_pages: int) -> None:
    """Each page's text as a JSON string on a line of its own, written as soon as the page
    is read: a reader stopped by its limits leaves the pages it finished."""
    try:
        reader = PdfReader(io.BytesIO(data))
        for page in reader.pages[:max_pages]:
            text = (page.extract_text() or "").strip().replace("\x00", "")
            out.write(json.dumps(text).encode("utf-8") + b"\n")
            out.flush()
    except PDF_ERRORS as error:
        raise SystemExit(f"the PDF could not be read: {error}") from error


def pixel_bytes(mode: str) -> int:
    """Bytes Pillow keeps per pixel of an image in `mode` (its decode's size per pixel)."""
    if mode in ("1", "L", "P"):
        return 1
    if mode.startswith("I;16"):
        return 2
    return 4


def image_scaled(
    data: bytes, out: BinaryIO, *, max_px: int, decode_max_bytes: int, jpeg_quality: int = 0
) -> None:
    """The image's first frame at most `max_px` on its longer side: a PNG, or a JPEG when
    `jpeg_quality` is set and the image has no transparency. Decoded at a reduced scale when
    the format allows (JPEG's draft) and only when its pixels take at most
    `decode_max_bytes` (counted from its mode and size, before decoding)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", Image.DecompressionBombWarning)
        try:
            image = Image.open(io.BytesIO(data))
        except (Image.DecompressionBombWarning, Image.DecompressionBombError) as error:
            raise SystemExit("the image has more pixels than Pillow's limit") from error
    with image:
        image.draft("RGB", (max_px, max_px))  # JPEG: decode at 1/2, 1/4 or 1/8 of the size
        needed = image.width * image.height * pixel_bytes(image.mode)
        if needed > decode_max_bytes:
            raise SystemExit(
                f"the image is too large to scale: decoding it takes {needed} bytes, more "
                f"than {decode_max_bytes}"
            )
        image.seek(0)
        transparent = image.mode in ("RGBA", "LA", "PA", "RGBa", "La") or (
            "transparency" in image.info
        )
        frame = image
        if image.mode in ("1", "P") and image.width * image.height * 4 <= decode_max_bytes:
            # Scaled in their own mode these two are sampled, not averaged.
            frame = image.convert("RGBA" if transparent else "L")
        frame.thumbnail((max_px, max_px))
        as_jpeg = bool(jpeg_quality) and not transparent
        frame = frame.convert("RGB" if as_jpeg else "RGBA")
        if as_jpeg:
            frame.save(out, format="JPEG", quality=jpeg_quality)
        else:
            frame.save(out, format="PNG")
