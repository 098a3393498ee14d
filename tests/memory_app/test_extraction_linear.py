"""Reading facts from a message costs time linear in the message (docs/design.md §27): the
worst inputs at a megabyte, where a pattern that retries every start inside a run of spaces
would take hours and the suite's timeout fails the test; no clock is read here."""

import pytest

from memory_app.extraction import classify_task, extract_facts
from memory_app.llm import json_object_text

MIB = 1024 * 1024


@pytest.mark.parametrize(
    ("text", "facts"),
    [
        ("my name is Ada" + " " * MIB + "Lovelace", ["The user's name is Ada."]),  # cut at 80
        ("my name is Ada" + " " * MIB + "and more", ["The user's name is Ada."]),
        ("i like " + "tea " * (MIB // 4), None),
        ("my favorite" + " " * MIB + "color is blue", None),
        ("remember that my " + "a " * (MIB // 2) + "b", []),
    ],
)
def test_the_worst_messages_at_a_megabyte_are_read(text, facts):
    found = [fact.text for fact in extract_facts(text)]
    if facts is not None:
        assert [" ".join(fact.split()) for fact in found] == facts
    classify_task(text, [])


def test_a_value_ends_where_its_clause_does_as_before():
    assert [fact.text for fact in extract_facts("I live in Paris and I like tea")] == [
        "The user lives in Paris.",
        "The user likes tea.",
    ]


def test_the_json_of_a_models_answer_is_cut_from_prose_in_linear_time():
    assert json_object_text('Sure: {"facts": []} hope it helps') == '{"facts": []}'
    assert json_object_text("no json here") == "no json here"
    assert json_object_text("} then {") == "} then {"
    assert json_object_text("{" * MIB) == "{" * MIB
