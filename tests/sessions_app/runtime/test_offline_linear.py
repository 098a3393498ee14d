"""The offline model reads any prompt in time linear in its length (docs/design.md §27).

It reads the prompt on the worker's event loop, so a prompt built to make its patterns
backtrack (20,000 spaces took 4.6 s) stalled every socket of the worker. The worst inputs
are fed at a megabyte, ten times the longest prompt: with a pattern that retries each start
against the rest of the text they would take hours, and the suite's timeout fails the test;
no clock is read here. What the model answers for ordinary requests is unchanged.
"""

import pytest

from sessions_app.runtime.providers import offline

MIB = 1024 * 1024
TOOLS = {"calculator", "clock", "wait", "remember", "forget", "recall", "schedule"}
TOOLS |= {"unschedule", "delegate"}

# (what comes first, what repeats, what ends the text): each made one of the old patterns
# try every later start against the rest of the text.
WORST = [
    ("", " ", ""),  # the leading spaces and brackets of an arithmetic expression
    ("", "\t", "\nz"),
    ("", "1", ""),  # a number that never meets an operator
    ("", " (", ""),
    ("1", " ", ""),
    ("", "1.", ""),
    ("", "1 )", ""),
    ("", "remember that my ", ""),  # a key that never meets " is "
    ("remember that my x is y", " ", "#"),  # " and " looked for at every space
    ("", "what is my ", "#"),
    ("what is my a", " ", "#"),
    ("", "forget my ", "\nz"),
    ("", "ask researcher to ", "\nz"),  # a task with no sentence end on its line
    ("ask researcher to y", " ", "\nz"),
    ("", "remind me ", ""),  # a reminder's text that never meets "in 10 minutes"
    ("remind me ", " in 1 s", "#"),
    ("", "wait ", ""),
    ("wait", " ", ""),
    ("", "every 1 second ", "#"),
    ("", "cancel reminder ", ""),
]


@pytest.mark.parametrize(("head", "repeated", "tail"), WORST)
def test_the_worst_prompts_at_a_megabyte_are_read(head, repeated, tail):
    text = head + repeated * (MIB // len(repeated)) + tail
    intents = offline._intents(text, TOOLS, {"researcher": "researcher"})
    assert {name for _, name, _ in intents} <= TOOLS


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("what is 2+3 and what time is it", [("calculator", {"expression": "2+3"}), ("clock", {})]),
        ("what is (1 + 2) * 3   and more", [("calculator", {"expression": "(1 + 2) * 3"})]),
        (
            "1+2 (3*4)",
            [("calculator", {"expression": "1+2"}), ("calculator", {"expression": "(3*4)"})],
        ),
        ("version 1.2.3-4", [("calculator", {"expression": "2.3-4"})]),
        ("2**10 please", [("calculator", {"expression": "2**10"})]),
        (
            "remember that my color is blue  and forget my size.",
            [("remember", {"key": "color", "value": "blue"}), ("forget", {"key": "size"})],
        ),
        ("what's my favourite tea?", [("recall", {"key": "favourite tea"})]),
        ("wait for 2 seconds", [("wait", {"seconds": 2.0})]),
        (
            "ask researcher to compute 6*7. thanks",
            [("delegate", {"agent": "researcher", "task": "compute 6*7"})],
        ),
        # A task ends with its sentence; on a line with none, there is no task.
        ("ask researcher to compute 6*7\nthanks", [("calculator", {"expression": "6*7"})]),
        (
            "remind me to stretch in 10 minutes!",
            [("schedule", {"text": "stretch", "kind": "reminder", "in_seconds": 600.0})],
        ),
        (
            "remind me to stretch and walk in 2 hours",
            [("schedule", {"text": "stretch and walk", "kind": "reminder", "in_seconds": 7200.0})],
        ),
        ("remind me to stretch\nand then to walk in 2 hours", []),
        (
            "every 2 hours remind me to drink water",
            [
                (
                    "schedule",
                    {"text": "drink water", "kind": "reminder", "every": 2, "unit": "hours"},
                )
            ],
        ),
    ],
)
def test_ordinary_requests_are_read_as_before(text, expected):
    intents = offline._intents(text, TOOLS, {"researcher": "researcher"})
    assert [(name, arguments) for _, name, arguments in intents] == expected
