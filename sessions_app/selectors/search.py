"""Search over a person's messages, shaped as the API and the page show it."""

from __future__ import annotations

from html import escape
from typing import Any

from sessions_app.store import SearchHit, get_store

SEARCH_QUERY_MAX_CHARS = 200
SEARCH_PAGE_DEFAULT = 20
SEARCH_PAGE_MAX = 50
SEARCH_OFFSET_MAX = 10_000


def search_snippet_html(hit: SearchHit) -> str:
    """The snippet as HTML a page can insert: every character of the message escaped, and
    the matched words wrapped in <mark> — the only tags it ever contains."""
    return "".join(
        f"<mark>{escape(text)}</mark>" if matched else escape(text) for text, matched in hit.snippet
    )


def search_hit_to_api(hit: SearchHit) -> dict[str, Any]:
    return {
        "session_id": hit.session_id,
        "title": hit.title,
        "seq": hit.seq,
        "role": hit.role,
        "created_at": hit.created_at.isoformat(),
        "rank": hit.rank,
        "snippet": search_snippet_html(hit),
    }


def search_messages(
    *, owner_id: int, query: str, limit: int = SEARCH_PAGE_DEFAULT, offset: int = 0
) -> dict[str, Any]:
    """A page of the owner's user and assistant messages matching `query`, best first.

    Only the owner's sessions are searched (the store filters by owner inside the query).
    One hit more than the page is asked for, to tell whether another page follows.
    """
    hits = get_store().search(owner_id, query, limit + 1, offset)
    return {
        "query": query,
        "hits": [search_hit_to_api(hit) for hit in hits[:limit]],
        "next_offset": offset + limit if len(hits) > limit else None,
    }
