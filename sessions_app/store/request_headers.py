"""Request headers, stored once per distinct value (docs/design.md §20).

A header is what a turn's requests share besides the conversation: the system prompt, the
tool schemas, the provider's parameters and the thinking level. Every turn used to copy
them into its `turn_start`; a thousand turns with the same tools stored the schemas a
thousand times. Now a header is a row keyed by the SHA-256 of its canonical JSON, and
`turn_start.data.header` names it.

Rows of the database under both backends, like approval requests: a header is shared by
every session (and every user) that sent the same one, so it belongs to no session and a
session's delete leaves it. It is a few kilobytes per distinct agent definition.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from django.db import connection, transaction
from django.utils import timezone

from sessions_app.models import RequestHeader


def header_digest(body: dict[str, Any]) -> str:
    """The header's key: SHA-256 of its JSON with sorted keys and no spaces."""
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


def header_save(body: dict[str, Any], digest: str | None = None) -> str:
    """Store the header unless a row has it already; return its digest (`digest`, when the
    caller computed it already: the JSON of a header's tool schemas is costly to write).

    A header this process has seen stored costs nothing: rows of headers are never deleted,
    so the process keeps their digests (a few per agent definition). Otherwise the lookup
    by key comes first: nearly every turn sends a header already stored, and the read is
    cheaper than shipping the schemas to the database with every turn. Concurrent first
    savers of one header both end with the one row (ON CONFLICT DO NOTHING).
    """
    digest = digest or header_digest(body)
    if digest in _known_stored:
        return digest
    if not _header_stored(digest):
        RequestHeader.objects.bulk_create(
            [RequestHeader(digest=digest, body=body, created_at=timezone.now())],
            ignore_conflicts=True,
        )
    # Known once committed: a rolled-back save leaves nothing to remember.
    transaction.on_commit(lambda: _remember(digest))
    return digest


# Digests of headers this process found or stored, committed. Bounded: past the bound it
# starts over (a process meets a few distinct headers; a bound only guards the unusual).
_known_stored: set[str] = set()
KNOWN_STORED_MAX = 1_000


def _remember(digest: str) -> None:
    if len(_known_stored) >= KNOWN_STORED_MAX:
        _known_stored.clear()
    _known_stored.add(digest)


def headers_forget_known() -> None:
    """Forget which headers are stored (a test database's tables are emptied between tests;
    a real one never deletes a header)."""
    _known_stored.clear()


def _header_stored(digest: str) -> bool:
    # Plain SQL on the primary key: every turn asks, and building the ORM's query cost more
    # than running it (docs/performance.md).
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT 1 FROM {connection.ops.quote_name(RequestHeader._meta.db_table)} "
            "WHERE digest = %s",
            [digest],
        )
        return cursor.fetchone() is not None


def header_get(digest: str) -> dict[str, Any] | None:
    return RequestHeader.objects.filter(digest=digest).values_list("body", flat=True).first()
