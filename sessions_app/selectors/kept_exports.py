"""The export files kept for their owner (docs/design.md §31, "export before you delete"):
what `session_export` wrote to EXPORTS_DIR/<owner id>/, listed and read back whether or not
the session is still there. They are the person's copy: a session's delete leaves them; the
account's deletion and EXPORT_RETENTION_DAYS after they were written remove them."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from django.conf import settings

from sessions_app.core.ids import safe_filename

EXPORT_FORMATS = ("md", "json")
CONTENT_TYPES = {"md": "text/markdown; charset=utf-8", "json": "application/json"}
# What `session_export` names a file: a safe id and a format. Anything else in the directory
# (a temporary file being written, starting with a dot) is not an export.
EXPORT_NAME = re.compile(r"[A-Za-z0-9_-]+\.(?:md|json)")
# Where an operator's exports of sessions without an owner go.
NO_OWNER_DIR = "system"


def exports_dir(owner_id: int | None) -> Path:
    """EXPORTS_DIR/<owner id>: one directory per person, because safe names collide across
    ids ("a.1" and "a_1") and one person's export must never replace another's."""
    return Path(settings.EXPORTS_DIR) / (str(owner_id) if owner_id is not None else NO_OWNER_DIR)


def export_url(filename: str) -> str:
    return f"/api/me/exports/{filename}/"


@dataclass(frozen=True)
class KeptExport:
    filename: str
    path: Path
    size: int
    written_at: datetime

    @property
    def fmt(self) -> str:
        return self.filename.rsplit(".", 1)[1]

    @property
    def content_type(self) -> str:
        return CONTENT_TYPES[self.fmt]

    @property
    def expires_at(self) -> datetime:
        return self.written_at + timedelta(days=settings.EXPORT_RETENTION_DAYS)

    def to_api(self) -> dict[str, Any]:
        return {
            "filename": self.filename,
            "format": self.fmt,
            "size": self.size,
            "written_at": self.written_at.isoformat(),
            "expires_at": self.expires_at.isoformat(),
            "url": export_url(self.filename),
        }


def _kept(path: Path) -> KeptExport | None:
    try:
        stat = path.stat()
    except FileNotFoundError:  # removed meanwhile (a sweep, a newer export's rename)
        return None
    written_at = datetime.fromtimestamp(stat.st_mtime, tz=UTC)
    return KeptExport(filename=path.name, path=path, size=stat.st_size, written_at=written_at)


def kept_exports(*, owner_id: int) -> list[KeptExport]:
    """The caller's kept export files, newest first."""
    directory = exports_dir(owner_id)
    if not directory.is_dir():
        return []
    found = [
        _kept(path) for path in directory.iterdir() if EXPORT_NAME.fullmatch(path.name) is not None
    ]
    return sorted((kept for kept in found if kept), key=lambda kept: kept.written_at, reverse=True)


def kept_export(*, owner_id: int, filename: str) -> KeptExport | None:
    """One of the caller's kept exports by its file name; None for a name that is not one
    (nothing outside the caller's own directory can be named: no separators, no dots first)."""
    if EXPORT_NAME.fullmatch(filename) is None:
        return None
    return _kept(exports_dir(owner_id) / filename)


def kept_exports_of_session(*, owner_id: int, session_id: str) -> list[KeptExport]:
    """The kept exports named after `session_id` (its md and its json, when made)."""
    name = safe_filename(session_id)
    found = (kept_export(owner_id=owner_id, filename=f"{name}.{fmt}") for fmt in EXPORT_FORMATS)
    return [kept for kept in found if kept]
