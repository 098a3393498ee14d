""" "Download everything" (docs/design.md §21): one zip of a user's sessions (JSON and
Markdown, the same renderings as a single session's export), memory facts and schedules,
produced piece by piece.

The zip is written into a small buffer that is emptied every CHUNK_BYTES, and the bytes go
out as they are made: at any moment the process holds one session's entries, a piece of its
rendering and the compressor's window, never the archive nor a whole file of it. zipfile
writes to a stream it cannot seek by putting each file's sizes after its data (a data
descriptor), which every unzip reads.

`user_data_zip` is the stream as a generator (the operator's command writes it to a file);
`user_data_zip_async` is the same stream for the ASGI server, each step (the store's reads,
the compressing) in the request's worker thread. Django's StreamingHttpResponse served a
plain generator under ASGI by first reading it to its end into a list: the whole zip in
memory before the first byte.
"""

from __future__ import annotations

import json
import zipfile
from collections.abc import AsyncIterator, Iterable, Iterator

from asgiref.sync import sync_to_async
from django.utils import timezone

from memory_app.services import memory_export_for_owner
from notices_app.services.goals import goals_export_for_owner
from notices_app.services.schedules import schedules_export_for_owner
from sessions_app import selectors
from sessions_app.core.ids import safe_filename

ARCHIVE_README = """Your data from Jarvis, as of {as_of}.

sessions/<id>.json   every session with every entry and notice (the export format)
sessions/<id>.md     the same session as a readable transcript
memory.json          what the agent learned about you: profile facts and procedures
schedules.json       your reminders and scheduled prompts, active and past
goals.json           your goals, open and finished, with their notes and results
files/<sha256>       the files you sent, named by the id the sessions' messages give them
"""


# How many bytes of the zip the stream gathers before it gives them out; and how much of a
# file's text is handed to the compressor at once.
CHUNK_BYTES = 64 * 1024


class _Drain:
    """A write-only stream whose bytes are taken out after each file of the zip."""

    def __init__(self):
        self.chunks: list[bytes] = []

    def write(self, data: bytes) -> int:
        self.chunks.append(bytes(data))
        return len(data)

    def flush(self) -> None:
        pass

    def size(self) -> int:
        return sum(map(len, self.chunks))

    def take(self) -> bytes:
        data = b"".join(self.chunks)
        self.chunks.clear()
        return data


def _json(value) -> Iterator[bytes]:
    """`value` as indented JSON, in pieces of about CHUNK_BYTES."""
    return _gathered(
        piece.encode("utf-8")
        for piece in json.JSONEncoder(ensure_ascii=False, indent=2).iterencode(value)
    )


def _text(text: str) -> Iterator[bytes]:
    for start in range(0, len(text), CHUNK_BYTES):
        yield text[start : start + CHUNK_BYTES].encode("utf-8")


def _gathered(pieces: Iterable[bytes]) -> Iterator[bytes]:
    # The JSON encoder gives a piece per token: the compressor takes them a chunk at a time.
    batch: list[bytes] = []
    size = 0
    for piece in pieces:
        batch.append(piece)
        size += len(piece)
        if size >= CHUNK_BYTES:
            yield b"".join(batch)
            batch.clear()
            size = 0
    if batch:
        yield b"".join(batch)


def _unique(name: str, taken: set[str]) -> str:
    # Safe names collide across ids ("a.1" and "a_1"); the second gets a number.
    candidate, number = name, 1
    while candidate in taken:
        number += 1
        candidate = f"{name}-{number}"
    taken.add(candidate)
    return candidate


def _files(owner_id: int) -> Iterator[tuple[str, Iterator[bytes]]]:
    yield "README.txt", _text(ARCHIVE_README.format(as_of=timezone.now().isoformat()))
    taken: set[str] = set()
    for meta in selectors.sessions_of_owner(owner_id=owner_id):
        as_json, as_markdown = selectors.session_export_documents(meta)
        name = _unique(safe_filename(meta.id), taken)
        yield f"sessions/{name}.json", _json(as_json)
        yield f"sessions/{name}.md", _text(as_markdown)
    yield "memory.json", _json(memory_export_for_owner(owner_id=owner_id))
    yield "schedules.json", _json(schedules_export_for_owner(owner_id=owner_id))
    yield "goals.json", _json(goals_export_for_owner(owner_id=owner_id))
    # The sessions' files (docs/design.md §23), once each, named by the id entries give them.
    session_ids = [meta.id for meta in selectors.sessions_of_owner(owner_id=owner_id)]
    for sha256 in selectors.blobs_of_sessions(session_ids):
        yield f"files/{sha256}", selectors.blob_chunks(sha256, CHUNK_BYTES)


def user_data_zip(*, owner_id: int) -> Iterator[bytes]:
    """The zip of everything the user owns, as a stream of chunks of about CHUNK_BYTES."""
    drain = _Drain()
    with zipfile.ZipFile(drain, mode="w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, pieces in _files(owner_id):
            # force_zip64: the size is not known before the file is written, and may pass
            # 2 GiB; the descriptor then has room for it.
            with archive.open(name, mode="w", force_zip64=True) as target:
                for piece in pieces:
                    target.write(piece)
                    if drain.size() >= CHUNK_BYTES:
                        yield drain.take()
    yield drain.take()


async def user_data_zip_async(*, owner_id: int) -> AsyncIterator[bytes]:
    """`user_data_zip` for an ASGI response: each chunk made in the request's worker thread
    (the store's reads are the ORM's), the event loop free in between."""
    chunks = user_data_zip(owner_id=owner_id)
    step = sync_to_async(_next_or_none, thread_sensitive=True)
    try:
        while (chunk := await step(chunks)) is not None:
            yield chunk
    finally:
        # A client that went away: the zip and the store's reads end here.
        await sync_to_async(chunks.close, thread_sensitive=True)()


def _next_or_none(chunks: Iterator[bytes]) -> bytes | None:
    return next(chunks, None)


def user_data_filename(username: str) -> str:
    return f"jarvis-{safe_filename(username)}-{timezone.now():%Y%m%d}.zip"
