"""An MCP call's result as the turn keeps it (docs/design.md §31).

Text parts become the tool result the model reads; images are kept in the blob store
(§23) and linked to the session, so the page shows them like uploaded images
and the model reads "[image: name, W×H]" in their place; `isError` is the result's
`is_error`. What a server sends is untrusted: at most RESULT_MAX_CHARS of text and
IMAGES_MAX images of at most UPLOAD_MAX_BYTES each are kept, within the owner's storage quota
like an upload, and an image's type and size
are read from its bytes by the same check an upload goes through (Pillow's bomb check
included), never taken from the server's word.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import io
import json
import logging
from collections.abc import Callable
from contextlib import AbstractContextManager

import mcp_types
from django.conf import settings

from sessions_app.core.file_types import file_type_of
from sessions_app.runtime.context.history import image_stand_in
from sessions_app.store.blobs import blob_link, owner_links, owner_usage

logger = logging.getLogger(__name__)

RESULT_MAX_CHARS = 100_000
IMAGES_MAX = 8


def _text_of(block) -> str:
    """A content block other than an image, as text."""
    if isinstance(block, mcp_types.TextContent):
        return block.text
    if isinstance(block, mcp_types.EmbeddedResource):
        resource = block.resource
        text = getattr(resource, "text", None)
        return text if text is not None else f"[resource: {resource.uri}]"
    if isinstance(block, mcp_types.ResourceLink):
        return f"[resource: {block.uri}]"
    return f"[{getattr(block, 'type', 'content')} omitted]"


def _image_keep(
    block: mcp_types.ImageContent, *, name: str, session_id: str, owner_id: int | None
) -> dict | str:
    """The image linked to the session (its attachment ref), or why it was not kept."""
    try:
        data = base64.b64decode(block.data, validate=True)
    except (binascii.Error, ValueError):
        return "[image omitted: not base64]"
    if len(data) > settings.UPLOAD_MAX_BYTES:
        return f"[image omitted: larger than UPLOAD_MAX_BYTES ({settings.UPLOAD_MAX_BYTES})]"
    file = io.BytesIO(data)
    try:
        file_type = file_type_of(file)
    except ValueError as refused:  # UnsupportedFile, ImageTooManyPixels
        return f"[image omitted: {refused}]"
    if file_type.kind != "image":
        return "[image omitted: the bytes are not an image]"
    sha256 = hashlib.sha256(data).hexdigest()
    # Counted like an upload: a server's images fill the person's quota, not past it.
    if not owner_links(owner_id=owner_id, sha256=sha256):
        if owner_usage(owner_id) + len(data) > settings.USER_STORAGE_QUOTA_BYTES:
            return "[image omitted: it would pass the storage quota (USER_STORAGE_QUOTA_BYTES)]"
    extension = file_type.mime.rsplit("/", 1)[-1]
    stored = blob_link(
        file=file,
        sha256=sha256,
        size=len(data),
        file_type=file_type,
        session_id=session_id,
        owner_id=owner_id,
        name=f"{name}.{extension}",
    )
    return stored.attachment()


def result_keep(
    *,
    result: mcp_types.CallToolResult,
    server: str,
    tool: str,
    session_id: str,
    owner_id: int | None,
    fenced: Callable[[], AbstractContextManager],
) -> tuple[str, bool, list[dict]]:
    """(text for the model, is_error, the kept images' refs) — in a store thread: images are
    written to the blob store, fenced to the turn's session."""
    parts: list[str] = []
    files: list[dict] = []
    images = 0
    for block in result.content:
        if not isinstance(block, mcp_types.ImageContent):
            parts.append(_text_of(block))
            continue
        images += 1
        if images > IMAGES_MAX:
            parts.append(f"[image omitted: more than {IMAGES_MAX} in one result]")
            continue
        with fenced():
            kept = _image_keep(
                block,
                name=f"{server}-{tool}-{images}",
                session_id=session_id,
                owner_id=owner_id,
            )
        if isinstance(kept, str):
            parts.append(kept)
        else:
            files.append(kept)
            parts.append(image_stand_in(kept))
    if not parts and result.structured_content is not None:
        parts.append(json.dumps(result.structured_content, ensure_ascii=False))
    text = "\n".join(parts)
    if len(text) > RESULT_MAX_CHARS:
        text = text[:RESULT_MAX_CHARS] + f"\n[… cut at {RESULT_MAX_CHARS} characters]"
    return text or "(no content)", bool(result.is_error), files
