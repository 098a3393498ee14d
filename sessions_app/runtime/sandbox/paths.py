"""What a path of a session's workspace may be (workspace.py keeps them; pack.py checks every
path a run returns against it)."""

from __future__ import annotations

from sessions_app.runtime.sandbox import inside

ATTACHMENTS = inside.ATTACHMENTS
# More files than this in one workspace are not kept (packing, unpacking and listing them is
# each run's cost).
MAX_FILES = inside.MAX_FILES
MAX_PATH_CHARS = 1000


def path_valid(path: str) -> bool:
    """A manifest path: relative, normalized (no empty, `.` or `..` part), not under
    `attachments/`, no NUL. (String operations only: a run checks every path it returns.)"""
    if not 0 < len(path) <= MAX_PATH_CHARS or "\x00" in path or path[0] == "/":
        return False
    parts = path.split("/")
    return parts[0] != ATTACHMENTS and not any(part in {"", ".", ".."} for part in parts)
