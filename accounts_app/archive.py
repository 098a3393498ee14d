""" "Download everything" (docs/design.md §21): one zip of a user's sessions (JSON and
Markdown, the same renderings as a single session's export), memory facts and schedules,
produced piece by piece.

The zip is written into a buffer that is emptied after every file, and the bytes go out as
they are made (a generator for a StreamingHttpResponse, or a file for the operator's
command): at any moment the process holds one session's rendering and the compressor's
window, never the archive. zipfile writes to a stream it cannot seek by putting each file's
sizes after its data (a data descriptor), which every unzip reads.
"""

from __future__ import annotations

import json
import zipfile
from collections.abc import Iterator

from django.utils import timezone

from memory_app.services import memory_export_for_owner
from notices_app.schedules import schedules_export_for_owner
from sessions_app import selectors
from sessions_app.ids import safe_filename
from sessions_app.store import get_store

ARCHIVE_README = """Your data from Jarvis, as of {as_of}.

sessions/<id>.json   every session with every entry and notice (the export format)
sessions/<id>.md     the same session as a readable transcript
memory.json          what the agent learned about you: profile facts and procedures
schedules.json       your reminders and scheduled prompts, active and past
"""


class _Drain:
    """A write-only stream whose bytes are taken out after each file of the zip."""

    def __init__(self):
        self.chunks: list[bytes] = []

    def write(self, data: bytes) -> int:
        self.chunks.append(bytes(data))
        return len(data)

    def flush(self) -> None:
        pass

    def take(self) -> bytes:
        data = b"".join(self.chunks)
        self.chunks.clear()
        return data


def _json(value) -> bytes:
    return json.dumps(value, ensure_ascii=False, indent=2).encode("utf-8")


def _unique(name: str, taken: set[str]) -> str:
    # Safe names collide across ids ("a.1" and "a_1"); the second gets a number.
    candidate, number = name, 1
    while candidate in taken:
        number += 1
        candidate = f"{name}-{number}"
    taken.add(candidate)
    return candidate


def _files(owner_id: int) -> Iterator[tuple[str, bytes]]:
    yield "README.txt", ARCHIVE_README.format(as_of=timezone.now().isoformat()).encode()
    store = get_store()
    taken: set[str] = set()
    for meta in store.list(owner_id=owner_id):
        entries = store.get_messages(meta.id)
        notices = store.get_proactive(meta.id)
        name = _unique(safe_filename(meta.id), taken)
        yield f"sessions/{name}.json", _json(selectors.export_json(meta, entries, notices))
        yield (
            f"sessions/{name}.md",
            selectors.export_markdown(meta, entries, notices).encode("utf-8"),
        )
    yield "memory.json", _json(memory_export_for_owner(owner_id=owner_id))
    yield "schedules.json", _json(schedules_export_for_owner(owner_id=owner_id))


def user_data_zip(*, owner_id: int) -> Iterator[bytes]:
    """The zip of everything the user owns, as a stream of chunks (one or more per file)."""
    drain = _Drain()
    with zipfile.ZipFile(drain, mode="w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, content in _files(owner_id):
            archive.writestr(name, content)
            chunk = drain.take()
            if chunk:
                yield chunk
    yield drain.take()


def user_data_filename(username: str) -> str:
    return f"jarvis-{safe_filename(username)}-{timezone.now():%Y%m%d}.zip"
