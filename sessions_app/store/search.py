"""Full-text search pieces shared by the store backends.

What is searchable: the content of `message` entries whose role is `user` or `assistant` —
the words of the conversation. Tool results are left out on purpose: they are what a tool
returned (web pages, files, JSON), often thousands of words the person never read, and
indexing them would drown the conversation's own words in every result list and make the
index, and so every append, several times more expensive.

Backends:
- PostgreSQL: a stored generated `tsvector` column with a GIN index (migration
  0005_search_index), so PostgreSQL itself keeps it current on every INSERT,
  INSERT … SELECT and DELETE;
  `websearch_to_tsquery` parses the query and `ts_headline` cuts the snippet.
- SQLite: an FTS5 table over the entry table, kept current by triggers (same migration).
- jsonl: the same FTS5 schema in a SQLite file next to the session files
  (`jsonl_search.py`), written by the store's append, branch and delete.

Snippets are cut from a bounded window of the message, never from the whole text. FTS5's
`snippet()` scores every match of a message against every other: a 100,000-character
message where every tenth word matches took about a second. PostgreSQL's `ts_headline`
parses and stems the whole text it is given: 28 ms for such a message, for every hit. Python finds
the places a wanted word may be said (a substring scan of the lower-cased text); the engine
cuts the snippet from a window of about `SNIPPET_WINDOW` characters around the first place
that really matches. So a hit deep inside a long message shows the words around it, and a message
no longer than one window gets exactly the snippet it always did.

Snippets mark matches with two Unicode noncharacters, which exist for exactly this kind of
internal use; `snippet_parts` turns them into (text, is_match) parts, so nothing downstream
ever has to trust markup that came out of a database.
"""

from __future__ import annotations

import re
import sqlite3
import threading
from dataclasses import dataclass
from datetime import datetime

SEARCHED_ROLES = ("user", "assistant")
MARK_START = "\ufdd0"
MARK_END = "\ufdd1"
SNIPPET_ELLIPSIS = "…"
SNIPPET_TOKENS = 24
SNIPPET_WINDOW = 1_000

# English stemming on both databases ("deploying" finds "deployed"). PostgreSQL's `english`
# configuration also drops stop words ("the", "and"); FTS5 has no stop-word list. These and
# SEARCHED_ROLES must agree with what migration 0005_search_index built.
POSTGRES_TEXT_CONFIG = "english"
FTS5_TOKENIZER = "porter unicode61 remove_diacritics 2"


@dataclass(frozen=True)
class SearchHit:
    """One matching message. `rank`: higher is better; `snippet`: (text, is_match) parts."""

    session_id: str
    title: str
    seq: int
    role: str
    created_at: datetime
    rank: float
    snippet: tuple[tuple[str, bool], ...]


def snippet_parts(marked: str) -> tuple[tuple[str, bool], ...]:
    """Split a snippet marked with MARK_START/MARK_END into (text, is_match) parts.

    Marks are read as a state switch, so a stray mark character inside the stored text can
    at worst shift a highlight; it can never produce unbalanced output.
    """
    parts: list[tuple[str, bool]] = []
    matched = False
    for piece in re.split(f"([{MARK_START}{MARK_END}])", marked):
        if piece == MARK_START:
            matched = True
        elif piece == MARK_END:
            matched = False
        elif piece:
            if parts and parts[-1][1] == matched:
                parts[-1] = (parts[-1][0] + piece, matched)
            else:
                parts.append((piece, matched))
    return tuple(parts)


# --- the query language -------------------------------------------------------------------
#
# The same syntax as PostgreSQL's websearch_to_tsquery: words must all appear, "quoted
# words" must appear together, `or` between words accepts either, `-word` excludes. SQLite's
# FTS5 has its own syntax, in which user text such as `c++`, `AND` or an odd quote is an
# error; `fts5_query` rebuilds the query from quoted strings only, so no user text is ever
# read as FTS5 syntax.

_TOKEN = re.compile(r'(-?)"([^"]*)"?|(\S+)')
_WORD_CHARACTER = re.compile(r"\w")


@dataclass(frozen=True)
class _Term:
    text: str
    excluded: bool


def _terms(query: str) -> list[_Term | None]:
    """The query's terms in order; None stands for an `or`."""
    terms: list[_Term | None] = []
    for match in _TOKEN.finditer(query):
        minus, phrase, word = match.groups()
        if word is not None:
            if word.lower() == "or":
                terms.append(None)
                continue
            excluded = word.startswith("-") and len(word) > 1
            text = word[1:] if excluded else word
        else:
            excluded, text = bool(minus), phrase
        if _WORD_CHARACTER.search(text):
            terms.append(_Term(text, excluded))
    return terms


def _fts5_string(text: str) -> str:
    return '"' + text.replace('"', '""') + '"'


def fts5_query(query: str) -> str | None:
    """The FTS5 MATCH expression for a websearch-style query; None if nothing is sought.

    A query of exclusions only finds nothing on every backend: "everything without X" is
    not a search.
    """
    groups: list[list[str]] = []  # AND of ORs
    excluded: list[str] = []
    joined = False  # the previous token was `or`
    for term in _terms(query):
        if term is None:
            joined = bool(groups)
            continue
        if term.excluded:
            excluded.append(_fts5_string(term.text))
        elif joined:
            groups[-1].append(_fts5_string(term.text))
        else:
            groups.append([_fts5_string(term.text)])
        joined = False
    if not groups:
        return None
    wanted = " AND ".join(
        group[0] if len(group) == 1 else "(" + " OR ".join(group) + ")" for group in groups
    )
    return "".join([f"({wanted})", *(f" NOT {text}" for text in excluded)])


def has_wanted_term(query: str) -> bool:
    """Whether the query asks for any word at all (not only exclusions)."""
    return any(term is not None and not term.excluded for term in _terms(query))


# --- the FTS5 schema (SQLite database and the jsonl index) --------------------------------


def fts5_table_sql(*, fts_table: str, entry_table: str) -> str:
    """An external-content FTS5 table over `entry_table`'s `content`, keyed by its `id`
    (the jsonl index; the SQLite database's table is the same, built by migration
    0005_search_index).

    External content: the text is stored once, in the entry table; the FTS table holds only
    the inverted index, and `snippet()` reads the text back by rowid.
    """
    return (
        f"CREATE VIRTUAL TABLE {fts_table} USING fts5(content, content='{entry_table}', "
        f"content_rowid='id', tokenize='{FTS5_TOKENIZER}')"
    )


def fts5_snippet_sql(fts_table: str) -> str:
    return (
        f"snippet({fts_table}, 0, char({ord(MARK_START)}), char({ord(MARK_END)}), "
        f"'{SNIPPET_ELLIPSIS}', {SNIPPET_TOKENS})"
    )


# --- snippets over bounded windows --------------------------------------------------------

_FIRST_WORDS = re.compile(rf"\s*(?:\S+\s+){{0,{SNIPPET_TOKENS - 1}}}\S*")
_WORD = re.compile(r"\w+")
WINDOWS_PER_MESSAGE = 8  # the most windows the engine is asked about, for one message
EDGE_SLACK = 100  # how far a window's edge may move to fall on a space


def _prefixes(query: str) -> list[str]:
    """How a wanted term's words start: the term without its last three letters, which
    stemming may change ("herons" finds "heron", "happy" finds "happiness")."""
    prefixes = set()
    for term in _terms(query):
        if term is not None and not term.excluded:
            word = _WORD.search(term.text).group()
            prefixes.add(word[: max(3, len(word) - 3)].lower())
    return sorted(prefixes)


def _candidates(prefixes: list[str]) -> re.Pattern:
    """Where a word starting like a wanted term begins: one of the prefixes, not preceded by
    a letter or digit (`[^\\W_]` is what `str.isalnum` accepts). A candidate is only a place
    to look: the engine decides whether it matches. One search finds the next place of any
    prefix, in C and without backtracking (each alternative is a literal), where a loop in
    Python over the places a prefix is found inside longer words cost a step per place, per
    prefix and per window."""
    return re.compile(r"(?<![^\W_])(?:" + "|".join(map(re.escape, prefixes)) + ")")


def snippet_windows(text: str, query: str) -> list[tuple[int, int]]:
    """(start, end) of the windows of `text` worth cutting a snippet from, in order: the whole
    text when it fits one, else one window around each of the first candidates for a match,
    each beginning and ending at a space."""
    if len(text) <= SNIPPET_WINDOW:
        return [(0, len(text))]
    prefixes = _prefixes(query)
    lowered = text.lower()
    if len(lowered) != len(text):  # a letter whose lower case is longer: offsets would drift
        lowered = "".join(letter if len(letter.lower()) > 1 else letter.lower() for letter in text)
    windows: list[tuple[int, int]] = []
    half = SNIPPET_WINDOW // 2
    searched_from = 0
    candidates = _candidates(prefixes) if prefixes else None
    while candidates and len(windows) < WINDOWS_PER_MESSAGE:
        found = candidates.search(lowered, searched_from)
        if found is None:
            break
        at = found.start()
        # The next window starts where the last one ended (give or take a word at the edge).
        start = _window_start(text, max(at - half, searched_from))
        windows.append((start, _window_end(text, at + half)))
        searched_from = windows[-1][1]
    return windows


# A window's edges move to a space nearby; text with no space there (a long token, a blob)
# is cut where it is, so no window ever grows past its size.


def _window_start(text: str, start: int) -> int:
    if start <= 0:
        return 0
    space = text.rfind(" ", max(start - EDGE_SLACK, 0), start)
    return space + 1 if space >= 0 else start


def _window_end(text: str, end: int) -> int:
    if end >= len(text):
        return len(text)
    space = text.find(" ", end, end + EDGE_SLACK)
    return space if space >= 0 else end


def snippet_of_window(text: str, window: tuple[int, int] | None, marked: str | None) -> str:
    """The snippet: the engine's `marked` cut of `window`, with an ellipsis where the text
    goes on; without one (no candidate matched: a word that stemming or folding changed
    beyond its start), the message's first words."""
    if window is None or marked is None:
        start, end = 0, len(_FIRST_WORDS.match(text, 0, SNIPPET_WINDOW).group())
        marked = text[:end]
    else:
        start, end = window
    if start > 0 and not marked.startswith(SNIPPET_ELLIPSIS):
        marked = SNIPPET_ELLIPSIS + marked
    if end < len(text) and not marked.endswith(SNIPPET_ELLIPSIS):
        marked += SNIPPET_ELLIPSIS
    return marked


class _WindowIndex(threading.local):
    """A private in-memory FTS5 table, one per thread, that cuts snippets of windows.

    SQLite's `snippet()` reads only what its own table holds, so a window of a stored
    message has to be indexed on its own to be cut. Every use is a transaction rolled back:
    the table is always empty, and a rollback costs a third of deleting the rows again.
    """

    db: sqlite3.Connection | None = None

    def connection(self) -> sqlite3.Connection:
        if self.db is None:
            self.db = sqlite3.connect(":memory:", isolation_level=None)
            self.db.execute(
                f"CREATE VIRTUAL TABLE excerpt USING fts5(content, tokenize='{FTS5_TOKENIZER}')"
            )
        return self.db


_window_index = _WindowIndex()


def fts5_window_snippet(text: str, query: str, match: str) -> str:
    """The marked snippet of `text` for the FTS5 expression `match` (made from `query`), cut
    from the first of its windows that matches."""
    windows = snippet_windows(text, query)
    if not windows:
        return snippet_of_window(text, None, None)
    db = _window_index.connection()
    db.execute("BEGIN")
    try:
        db.executemany(
            "INSERT INTO excerpt (rowid, content) VALUES (?, ?)",
            [(n, text[start:end]) for n, (start, end) in enumerate(windows)],
        )
        found = db.execute(
            f"SELECT rowid, {fts5_snippet_sql('excerpt')} FROM excerpt WHERE excerpt MATCH ? "
            "ORDER BY rowid LIMIT 1",
            (match,),
        ).fetchone()
    finally:
        db.execute("ROLLBACK")
    if found is None:
        return snippet_of_window(text, None, None)
    return snippet_of_window(text, windows[found[0]], found[1])
