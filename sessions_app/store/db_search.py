"""Search for the `db` backend: PostgreSQL full text or SQLite FTS5, one query per page.

Both rank every match of the caller's messages, keep the requested page, and only then cut
snippets, each from a bounded window of its message (search.py says why): a page's worth,
never all matches, and never a whole long message.
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
    fts5_window_snippet,
    has_wanted_term,
    snippet_of_window,
    snippet_parts,
    snippet_windows,
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
            page.rank, e.content
        FROM page
        JOIN {tables["entry"]} e ON e.id = page.id
        JOIN {tables["session"]} s ON s.id = e.session_id
        ORDER BY page.rank DESC, e.created_at DESC, e.session_id, e.seq DESC
    """
    with connection.cursor() as cursor:
        # The page's texts come back whole: Python finds where in each to look, and
        # ts_headline then reads those windows only (search.py).
        cursor.execute(sql, [query, owner_id, limit, offset])
        rows = cursor.fetchall()
        if not rows:
            return []
        texts = [row[-1] for row in rows]
        windows = [snippet_windows(text, query) for text in texts]
        headlines = _postgres_headlines(cursor, query, texts, windows)
    return [
        _hit(*row[:-1], snippet_of_window(text, *headlines.get(hit, (None, None))))
        for hit, (row, text) in enumerate(zip(rows, texts, strict=True))
    ]


def _postgres_headlines(cursor, query, texts, windows) -> dict[int, tuple]:
    """{hit: (window, marked headline)} for the first window of each hit that matches,
    every window of the page cut in one statement."""
    cells = [
        (hit, number, texts[hit][start:end])
        for hit, hit_windows in enumerate(windows)
        for number, (start, end) in enumerate(hit_windows)
    ]
    if not cells:
        return {}
    cursor.execute(
        f"""
        WITH wanted AS (SELECT websearch_to_tsquery('{POSTGRES_TEXT_CONFIG}', %s) AS q)
        SELECT DISTINCT ON (cell.hit) cell.hit, cell.number,
            ts_headline('{POSTGRES_TEXT_CONFIG}', translate(cell.text, %s, %s), wanted.q, %s)
        FROM unnest(%s::int[], %s::int[], %s::text[]) AS cell (hit, number, text)
        CROSS JOIN wanted
        WHERE to_tsvector('{POSTGRES_TEXT_CONFIG}', cell.text) @@ wanted.q
        ORDER BY cell.hit, cell.number
        """,
        [
            query,
            ANGLE_BRACKETS,
            ANGLE_STAND_INS,
            HEADLINE_OPTIONS,
            *(list(column) for column in zip(*cells, strict=True)),
        ],
    )
    return {
        hit: (windows[hit][number], marked.translate(RESTORE_ANGLE_BRACKETS))
        for hit, number, marked in cursor.fetchall()
    }


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
        # Read apart from the ranking: a sort carries every column it selects, and the texts
        # of all matches, not a page's, would go through it.
        marks = ", ".join(["%s"] * len(rows))
        cursor.execute(
            f"SELECT id, content FROM {tables['entry']} WHERE id IN ({marks})",
            [row[0] for row in rows],
        )
        texts = dict(cursor.fetchall())
    return [_hit(*row[1:], fts5_window_snippet(texts[row[0]], query, match)) for row in rows]
