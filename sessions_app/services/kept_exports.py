"""The end of a kept export (docs/design.md §31): export files stay after their session's
delete, for their owner, and go EXPORT_RETENTION_DAYS after they were written — removed by
the retention sweep (accounts_app.retention), or with the account."""

from __future__ import annotations

import os
from datetime import datetime, timedelta
from pathlib import Path

from django.conf import settings


def kept_exports_sweep(*, as_of: datetime, dry_run: bool = False) -> list[Path]:
    """Remove every file under EXPORTS_DIR written more than EXPORT_RETENTION_DAYS before
    `as_of` (a temporary file a crashed export left behind too); the paths removed, or with
    `dry_run` the ones that would be."""
    root = Path(settings.EXPORTS_DIR)
    if not root.is_dir():
        return []
    cutoff = (as_of - timedelta(days=settings.EXPORT_RETENTION_DAYS)).timestamp()
    removed = []
    for owner_dir in sorted(root.iterdir()):
        if not owner_dir.is_dir():
            continue
        for path in sorted(owner_dir.iterdir()):
            if _written_before(path, cutoff) and (dry_run or _remove_if_old(path, cutoff)):
                removed.append(path)
    return removed


def _written_before(path: Path, cutoff: float) -> bool:
    try:
        return path.is_file() and path.stat().st_mtime < cutoff
    except FileNotFoundError:  # replaced or removed meanwhile
        return False


def _remove_if_old(path: Path, cutoff: float) -> bool:
    """Remove `path` if the file there is still the old one. An export of the same session
    may be renamed over it at any moment (`session_export`): the file is first moved aside in
    one step, and a new export found moved aside is linked back, never over a newer one."""
    aside = path.with_name(f".{path.name}.swept")
    try:
        os.rename(path, aside)
    except FileNotFoundError:
        return False
    if aside.stat().st_mtime < cutoff:
        aside.unlink()
        return True
    try:
        os.link(aside, path)
    except FileExistsError:
        pass  # a newer export is there already; the one moved aside was older than it
    aside.unlink()
    return False
