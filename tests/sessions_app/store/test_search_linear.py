"""Search reads the query and each hit's message in time linear in their length (docs/design.md
§27): counted in lines of Python run, never by a clock."""

import pytest

from sessions_app.store import search
from tests.sessions_app.core.test_limits_linear import lines_run

MIB = 1024 * 1024
# Words whose prefixes are found inside longer words all through the message: each such place
# used to cost a step of Python, for every prefix and every window.
PREFIX_QUERY = " ".join("a" * n for n in range(1, 19))


@pytest.mark.parametrize(
    "text",
    ["b" + "a" * MIB, "ba " * (MIB // 3), "x" * MIB, ("b" + "a" * 2_000 + " ") * (MIB // 2_002)],
)
def test_the_windows_of_a_megabyte_message_take_a_bounded_number_of_steps(text):
    search.snippet_windows("a" * 2_000, PREFIX_QUERY)  # the query's pattern is compiled once
    steps = lines_run(search.snippet_windows, text, PREFIX_QUERY)
    # Steps for each term of the query and each window; none for the message's characters.
    terms = len(search._terms(PREFIX_QUERY))
    assert steps <= 40 + 20 * terms + 12 * search.WINDOWS_PER_MESSAGE, steps


@pytest.mark.parametrize(
    "query",
    ['"' + "a " * (MIB // 2), '-"' * (MIB // 2), "a" * MIB, " " * MIB, '"a" ' * (MIB // 4)],
)
def test_a_megabyte_query_is_parsed_in_one_pass(query):
    # A few steps of Python per token (a word or a quoted phrase, each read once, the
    # closing quote optional so that an unclosed one never makes the tokenizer try again
    # from each later quote); nothing per character.
    tokens = len(query.split()) + query.count('"')
    steps = lines_run(search._terms, query)
    assert steps <= 20 + 8 * tokens, steps
    search.fts5_query(query)
