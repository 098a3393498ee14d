"""The session store: `get_store()` returns the configured backend (docs/design.md §4).

It is the only place that reads which backend is configured; everything else talks to the
protocol (base.py) and to the modules of rows every backend shares (connections.py,
approvals.py).
"""

from functools import lru_cache

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from sessions_app.store.base import (
    AgentMismatch,
    CorruptSessionFile,
    EntryRecord,
    InvalidSessionId,
    NewEntry,
    Notice,
    SearchHit,
    SessionExists,
    SessionMeta,
    SessionNotFound,
    SessionStore,
    StoreError,
)
from sessions_app.store.db import DbSessionStore
from sessions_app.store.jsonl import JsonlSessionStore

__all__ = [
    "AgentMismatch",
    "CorruptSessionFile",
    "EntryRecord",
    "InvalidSessionId",
    "NewEntry",
    "Notice",
    "SearchHit",
    "SessionExists",
    "SessionMeta",
    "SessionNotFound",
    "SessionStore",
    "StoreError",
    "get_store",
]


@lru_cache(maxsize=1)
def get_store() -> SessionStore:
    backend = settings.JARVIS_SESSION__PERSISTENCE_BACKEND
    if backend in {"db", "postgres"}:
        return DbSessionStore()
    if backend == "jsonl":
        return JsonlSessionStore(settings.SESSIONS_DIR)
    raise ImproperlyConfigured(f"unknown session persistence backend {backend!r}")
