"""The JSON depth check costs time linear in the text, whatever the text holds, and decides
as the parser would (docs/design.md §27).

It runs on every WebSocket frame and every JSON body, before the parser, so a client chooses
its input: the worst inputs are fed at the size of the largest frame Daphne takes (1 MiB).
The cost is shown by counting the Python lines the check runs (everything else it does is a
single pass of a C string method), never by a clock.
"""

from __future__ import annotations

import gc
import json
import sys

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from sessions_app.core import limits

MIB = 1024 * 1024
BLOCK = 65_536  # the scan sums its steps a block of this many brackets at a time


def worst_inputs(size: int) -> dict[str, str]:
    """The inputs that made the old regular expression backtrack, and their neighbours, each
    `size` characters long (with enough brackets to be scanned at all)."""
    deep = "[" * (limits.JSON_MAX_DEPTH + 1)
    half = size // 2
    return {
        "an unclosed string of escaped quotes": (deep + '"' + '\\"' * half)[:size],
        "quotes and backslashes in turn": (deep + '"\\' * half)[:size],
        "a run of backslashes": (deep + '"' + "\\" * size)[:size],
        "a megabyte of opening brackets": "[" * size,
        "a megabyte of empty arrays": "[]" * half,
        "empty strings in arrays": ('[""]' * size)[:size],
        "brackets inside one long string": '{"a": "' + "[{" * half,
        "spaces after the brackets": (deep + " " * size)[:size],
        "quotes only": (deep + '"' * size)[:size],
    }


def real_depth(value) -> int:
    """How deep a parsed document nests, walked without recursion."""
    deepest, pending = 0, [(value, 1)]
    while pending:
        value, level = pending.pop()
        children = value.values() if isinstance(value, dict) else value
        if isinstance(value, dict | list):
            deepest = max(deepest, level)
            pending.extend((child, level + 1) for child in children)
    return deepest


def lines_run(function, *args) -> int:
    """How many lines of Python `function` ran (its callees included)."""
    ran = 0

    def tracer(frame, event, arg):
        nonlocal ran
        if event == "line":
            ran += 1
        return tracer

    # A garbage collection inside `function` would run other objects' finalizers (an
    # earlier test's client, say) and count their lines: collect first, none meanwhile.
    gc.collect()
    gc.disable()
    sys.settrace(tracer)
    try:
        function(*args)
    finally:
        sys.settrace(None)
        gc.enable()
    return ran


def test_the_worst_inputs_at_a_megabyte_cost_a_bounded_number_of_steps():
    small, large = worst_inputs(BLOCK), worst_inputs(MIB)
    for name, text in large.items():
        steps = lines_run(limits.json_too_deep, text)
        # A handful of lines for each block of brackets; nothing per character, nothing per
        # quote: the steps that read characters are C passes, each once over the text.
        assert steps <= 40 + 8 * (len(text) // BLOCK), (name, steps)
        assert steps <= 40 + 16 * lines_run(limits.json_too_deep, small[name]), name


def test_the_worst_inputs_at_a_megabyte_are_decided_as_the_parser_would():
    decided = {name: limits.json_too_deep(text) for name, text in worst_inputs(MIB).items()}
    assert decided == {
        "an unclosed string of escaped quotes": True,  # the brackets before it nest 101 deep
        "quotes and backslashes in turn": True,
        "a run of backslashes": True,
        "a megabyte of opening brackets": True,
        "a megabyte of empty arrays": False,
        "empty strings in arrays": False,
        "brackets inside one long string": False,
        "spaces after the brackets": True,
        "quotes only": True,
    }


def test_an_unclosed_string_of_escaped_quotes_is_refused_by_the_parser_not_the_depth_check():
    # Brackets inside the string are not nesting, even when the string never ends.
    text = '{"type": "prompt", "text": "' + "[" * 200 + '\\"' * (MIB // 2 - 200)
    assert not limits.json_too_deep(text)
    try:
        limits.json_loads(text)
    except limits.JsonTooDeep:  # pragma: no cover - the assertion below says what went wrong
        raise AssertionError("an unclosed string is not deep") from None
    except ValueError as error:
        assert "Unterminated string" in str(error)
    else:  # pragma: no cover
        raise AssertionError("an unclosed string parsed")


# --- the same decision as the parser ---------------------------------------------------------

JSONISH = '[]{}",: a\\'
tricky_text = st.text(alphabet=JSONISH + "n\u00e9\U0001f600", max_size=12)
scalars = st.one_of(st.none(), st.booleans(), st.integers(), tricky_text)
documents = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(tricky_text, inner, max_size=3),
    max_leaves=12,
)


@st.composite
def deep_documents(draw):
    """A document wrapped in arrays and objects to about JSON_MAX_DEPTH levels, with strings
    full of brackets, quotes and backslashes at every level."""
    value = draw(documents)
    for _ in range(draw(st.integers(limits.JSON_MAX_DEPTH - 4, limits.JSON_MAX_DEPTH + 2))):
        if draw(st.booleans()):
            value = [draw(tricky_text), value]
        else:
            value = {draw(tricky_text): value}
    return value


@given(st.text(alphabet=JSONISH, max_size=60))
@example('["\\\\"]')
@example('["\\\\\\"[", []]')
@example('{"[": {"\\"": ["]"]}}')
@settings(max_examples=1000)
def test_on_random_jsonish_text_the_depth_is_what_the_parser_finds(text):
    try:
        parsed = json.loads(text)
    except ValueError:
        return
    assert limits.json_nesting_depth(text) == real_depth(parsed)


@given(st.text(max_size=80))
@settings(max_examples=500)
def test_on_random_text_the_depth_is_what_the_parser_finds(text):
    try:
        parsed = json.loads(text)
    except ValueError:
        return
    assert limits.json_nesting_depth(text) == real_depth(parsed)


@given(deep_documents(), st.booleans())
@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
def test_on_deep_documents_the_check_refuses_exactly_those_deeper_than_the_limit(value, ascii):
    text = json.dumps(value, ensure_ascii=ascii)
    assert limits.json_nesting_depth(text) == real_depth(value)
    assert limits.json_too_deep(text) == (real_depth(value) > limits.JSON_MAX_DEPTH)


def test_the_text_checks_at_a_megabyte_take_a_bounded_number_of_steps():
    worst = [" " * MIB, "a" * MIB + "\x00", "\ud800" * MIB, '"\\' * (MIB // 2)]
    for text in worst:
        for check in (limits.prompt_check, limits.title_check, limits.notice_check):
            steps = lines_run(lambda value, check=check: _refusal(check, value), text)
            assert steps <= 40, (check.__name__, steps)
    # Every string of a parsed frame is checked once: a few steps for each, however long.
    strings = 64 * (MIB // 4096)
    document = [{"k": ["\\" * 64] * 64} for _ in range(MIB // 4096)]
    steps = lines_run(lambda: limits.strings_check(document, name="the frame"))
    assert steps <= 12 * strings, steps


def _refusal(check, value):
    try:
        check(value)
    except limits.InputInvalid as error:
        return error
    return None
