"""Search for the `db` backend: PostgreSQL full text or SQLite FTS5, one query per page.

Both rank every match of the caller's messages, keep the requested page, and only then cut
snippets, which costs a re-parse of each message's text: a page's worth, never all matches.
Order: rank (best first), then the newest message, then session id and seq so that pages
never overlap or skip when ranks and times tie (a branch's copies share both).
"""

from __future__ import annotations

from datetime import datetime

from django.db import connection

from sessions_app.store.search import (
    MARK_END,
    MARK_START,
    POSTGRES_TEXT_CONFIG,
    SearchHit,
    fts5_query,
    fts5_snippet_sql,
    has_wanted_term,
    snippet_parts,
)

SQLITE_FTS_TABLE = "sessions_app_entry_search"  # built by migration 0005_search_index
# PostgreSQL's own excerpt length (15-35 words): shorter settings made it drop the first
# words of short messages.
HEADLINE_OPTIONS = f"StartSel={MARK_START}, StopSel={MARK_END}"
# ts_headline drops whatever its parser reads as an HTML tag, so a message about `<b>` would
# lose it from its snippet. The angle brackets go in as two noncharacters and come back out.
ANGLE_BRACKETS = "<>"
ANGLE_STAND_INS = "\ufdd2\ufdd3"
RESTORE_ANGLE_BRACKETS = str.maketrans(ANGLE_STAND_INS, ANGLE_BRACKETS)


def search(tables: dict[str, str], owner_id: int, query: str, limit: int, offset: int):
    if not has_wanted_term(query):
        return []
    if connection.vendor == "postgresql":
        return _search_postgres(tables, owner_id, query, limit, offset)
    return _search_sqlite(tables, owner_id, query, limit, offset)


def _hit(session_id, title, seq, role, created_at, rank, marked) -> SearchHit:
    return SearchHit(
        session_id=session_id,
        title=title,
        seq=seq,
        role=role,
        created_at=datetime.fromisoformat(created_at),
        rank=float(rank),
        snippet=snippet_parts(marked),
    )


def _search_postgres(tables, owner_id, query, limit, offset) -> list[SearchHit]:
    # `querytree` is 'T' for a query of exclusions only (it would scan every message) and
    # empty for one of stop words only: both find nothing, as on the other backends.
    sql = f"""
        WITH wanted AS (
            SELECT q FROM websearch_to_tsquery('{POSTGRES_TEXT_CONFIG}', %s) AS q
            WHERE querytree(q) NOT IN ('T', '')
        ),
        page AS (
            SELECT e.id, ts_rank(e.search_vector, wanted.q) AS rank
            FROM {tables["entry"]} e
            JOIN {tables["session"]} s ON s.id = e.session_id
            CROSS JOIN wanted
            WHERE s.owner_id = %s AND e.search_vector @@ wanted.q
            ORDER BY rank DESC, e.created_at DESC, e.session_id, e.seq DESC
            LIMIT %s OFFSET %s
        )
        SELECT e.session_id, s.title, e.seq, e.role,
            to_char(e.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"+00:00"'),
            page.rank,
            ts_headline(
                '{POSTGRES_TEXT_CONFIG}', translate(e.content, %s, %s), wanted.q, %s
            )
        FROM page
        JOIN {tables["entry"]} e ON e.id = page.id
        JOIN {tables["session"]} s ON s.id = e.session_id
        CROSS JOIN wanted
        ORDER BY page.rank DESC, e.created_at DESC, e.session_id, e.seq DESC
    """
    with connection.cursor() as cursor:
        cursor.execute(
            sql,
            [query, owner_id, limit, offset, ANGLE_BRACKETS, ANGLE_STAND_INS, HEADLINE_OPTIONS],
        )
        return [
            _hit(*row[:-1], row[-1].translate(RESTORE_ANGLE_BRACKETS)) for row in cursor.fetchall()
        ]


def _search_sqlite(tables, owner_id, query, limit, offset) -> list[SearchHit]:
    match = fts5_query(query)
    if match is None:
        return []
    fts = SQLITE_FTS_TABLE
    with connection.cursor() as cursor:
        # bm25() is lower for better matches; the API's rank is higher-is-better.
        cursor.execute(
            f"""
            SELECT e.id, e.session_id, s.title, e.seq, e.role, e.created_at || '+00:00',
                -found.score
            FROM (SELECT rowid AS id, bm25({fts}) AS score FROM {fts} WHERE {fts} MATCH %s)
                AS found
            JOIN {tables["entry"]} e ON e.id = found.id
            JOIN {tables["session"]} s ON s.id = e.session_id
            WHERE s.owner_id = %s
            ORDER BY found.score, e.created_at DESC, e.session_id, e.seq DESC
            LIMIT %s OFFSET %s
            """,
            [match, owner_id, limit, offset],
        )
        rows = cursor.fetchall()
        if not rows:
            return []
        snippets = fts5_snippets(cursor, fts, match, [row[0] for row in rows])
    return [_hit(*row[1:], snippets[row[0]]) for row in rows]


def fts5_snippets(cursor, fts_table: str, match: str, rowids: list[int]) -> dict[int, str]:
    """Marked snippets of the given rows (a page of hits), by rowid."""
    marks = ", ".join(["%s"] * len(rowids))
    cursor.execute(
        f"SELECT rowid, {fts5_snippet_sql(fts_table)} FROM {fts_table} "
        f"WHERE {fts_table} MATCH %s AND rowid IN ({marks})",
        [match, *rowids],
    )
    return dict(cursor.fetchall())
