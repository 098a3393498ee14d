"""A user message's attachments as a model is sent them (docs/design.md §23).

The message keeps ids only (`data.attachments`); the bytes are read from the blob store each
time a request is built, so a replay (§20) builds the same request from the same bytes. The
parts here are the providers' common shape, which each projection turns into its own:
- an image: `{"type": "image", "mime", "data"}` (base64) for a model that sees images, else
  the text "[image: name, W×H]";
- a text file or a PDF: `{"type": "text", "text"}` — its name, then its text, bounded as a
  tool result is (TOOL_RESULT_MAX_TOKENS, head and tail), so one file cannot fill the window.
"""

from __future__ import annotations

import base64
import io
import logging
import threading
from collections import OrderedDict

from PIL import Image

from sessions_app.core.file_types import NoPreview, image_scaled
from sessions_app.runtime.context.context_window import IMAGE_TOKENS
from sessions_app.runtime.context.history import (
    bounded_result,
    image_stand_in,
    tool_result_max_chars,
)
from sessions_app.store.blobs import blob_read, blob_text

logger = logging.getLogger(__name__)

# A step builds its request more than once (counted, then sent) and every step of a turn
# sends the conversation again: an image's base64 is kept, by its SHA-256 (its bytes never
# change), up to this many characters per process, the least recently used going first.
ENCODED_CACHE_CHARS = 64 * 1024 * 1024
_encoded: OrderedDict[str, tuple[str, str] | None] = OrderedDict()
_encoded_lock = threading.Lock()


# What a provider takes of one image: Anthropic refuses one over 5 MB (its base64 is a third
# larger than the bytes) or 8000 px a side, and scales anything over 1568 px down anyway;
# OpenAI takes up to 20 MB. A larger image is sent scaled to SEND_MAX_PX on its longer side,
# as a JPEG (a PNG when it has transparency) — the same bytes every time, so a replay (§20)
# still builds the request that was sent.
SEND_MAX_BYTES = 3_750_000
SEND_MAX_PX = 1568
PROVIDER_MAX_SIDE_PX = 8000
JPEG_QUALITY = 85
PNG_MAGIC = b"\x89PNG"


def _sendable(raw: bytes, mime: str) -> tuple[str, bytes]:
    """The image as a provider takes it: (mime, bytes), scaled down when too large — in a
    bounded child process (core/file_types.image_scaled); NoPreview when it cannot be."""
    with Image.open(io.BytesIO(raw)) as image:  # the header only
        if len(raw) <= SEND_MAX_BYTES and max(image.size) <= PROVIDER_MAX_SIDE_PX:
            return mime, raw
    scaled = image_scaled(raw, max_px=SEND_MAX_PX, jpeg_quality=JPEG_QUALITY)
    return ("image/png" if scaled.startswith(PNG_MAGIC) else "image/jpeg"), scaled


def _base64_of(sha256: str, mime: str) -> tuple[str, str] | None:
    """(mime, base64) of the image as it is sent; None for one that cannot be sent (too
    large to scale), which is remembered too: a turn builds its requests again and again."""
    with _encoded_lock:
        if sha256 in _encoded:
            _encoded.move_to_end(sha256)
            return _encoded[sha256]
    try:
        sent_mime, raw = _sendable(blob_read(sha256), mime)
        encoded = (sent_mime, base64.b64encode(raw).decode("ascii"))
    except NoPreview as error:
        logger.warning("attachment %s is not sent: %s", sha256, error)
        encoded = None
    with _encoded_lock:
        _encoded[sha256] = encoded
        total = sum(len(value[1]) for value in _encoded.values() if value)
        while total > ENCODED_CACHE_CHARS and len(_encoded) > 1:
            _, dropped = _encoded.popitem(last=False)
            total -= len(dropped[1]) if dropped else 0
    return encoded


def _text_part(ref: dict) -> dict:
    kind = "pdf" if ref.get("mime") == "application/pdf" else "text"
    try:
        text = blob_text(ref["id"], kind=kind)
    except OSError:
        logger.warning("attachment %s is missing from the blob store", ref.get("id"))
        return {"type": "text", "text": f"[file: {ref.get('name', 'file')} (no longer stored)]"}
    body = bounded_result(text, tool_result_max_chars())
    return {"type": "text", "text": f"[file: {ref.get('name', 'file')}]\n{body}"}


def _image_part(ref: dict) -> dict:
    try:
        encoded = _base64_of(ref["id"], ref["mime"])
    except OSError:
        logger.warning("attachment %s is missing from the blob store", ref.get("id"))
        return {"type": "text", "text": image_stand_in(ref) + " (no longer stored)"}
    if encoded is None:
        return {"type": "text", "text": image_stand_in(ref) + " (too large to send)"}
    mime, data = encoded
    return {"type": "image", "mime": mime, "data": data}


def attachment_parts(refs: list[dict], *, sees_images: bool) -> list[dict]:
    """The parts a model is sent for a message's attachments, in their order."""
    parts = []
    for ref in refs:
        if str(ref.get("mime", "")).startswith("image/"):
            parts.append(
                _image_part(ref) if sees_images else {"type": "text", "text": image_stand_in(ref)}
            )
        else:
            parts.append(_text_part(ref))
    return parts


def seeing_parts(refs: list[dict]) -> list[dict]:
    """For a model that sees images (OpenAI's and Anthropic's)."""
    return attachment_parts(refs, sees_images=True)


def blind_parts(refs: list[dict]) -> list[dict]:
    """For a model that does not (the offline model): images as "[image: name, W×H]"."""
    return attachment_parts(refs, sees_images=False)


def attachments_tokens(refs: list[dict], *, chars_per_token: int = 4) -> int:
    """An estimate of what a message's attachments add to a request, without reading them."""
    total = 0
    for ref in refs:
        if str(ref.get("mime", "")).startswith("image/"):
            total += IMAGE_TOKENS
        else:
            total += min(int(ref.get("size") or 0), tool_result_max_chars()) // chars_per_token
    return total
