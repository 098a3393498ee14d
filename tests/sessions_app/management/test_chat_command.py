"""`manage.py chat` holds a conversation from piped input and leaves a valid history; it refuses
what the API refuses."""

import re

import pytest

from sessions_app.core import limits
from sessions_app.store import get_store
from tests.helpers import run_chat
from tests.sessions_app.runtime.conftest import assert_history_valid

pytestmark = pytest.mark.django_db(transaction=True)


def test_chat_command_holds_a_conversation_from_piped_input():
    lines = "hello\nwhat is 2+3 and what time is it\n\nwhat did I say\n/quit\nnever sent\n"
    # No sweep within the test's time: each queued line must start when the answer before it
    # ends, as the person sees it, not when the recovery sweep comes by.
    completed = run_chat("test-chat", lines=lines, JARVIS_MODEL="offline", QUEUE_SWEEP_SEC="3600")
    assert completed.returncode == 0, completed.stderr
    out = completed.stdout
    assert "You said: “hello”" in out
    assert '→ calculator({"expression":"2+3"})' in out
    assert "→ clock({})" in out
    assert "← calculator: 5" in out
    assert "2+3 = 5." in out
    assert "You said: “what is 2+3 and what time is it”" in out
    history = get_store().get_messages("test-chat")
    assert [e.content for e in history if e.role == "user"] == [
        "hello",
        "what is 2+3 and what time is it",
        "what did I say",
    ]
    assert_history_valid("test-chat")


def test_chat_command_says_where_a_waiting_call_can_be_answered():
    completed = run_chat(
        "test-chat-approval",
        lines="forget my color\n/quit\n",
        JARVIS_MODEL="offline",
        APPROVAL_TIMEOUT_SEC="0.2",
    )
    assert completed.returncode == 0, completed.stderr
    assert "? forget waits for approval" in completed.stdout
    assert "✗ forget: not run: no answer to the approval request came within 0.2 seconds" in (
        completed.stdout
    )
    assert_history_valid("test-chat-approval")


# --- input limits -------------------------------------------------------------------------


def test_the_chat_command_refuses_what_the_api_refuses(backend):
    lines = "a\x00b\n" + "x" * (limits.PROMPT_MAX_CHARS + 1) + "\nwhat is 6*7?\n"
    completed = run_chat(
        "test-limits",
        lines=lines,
        JARVIS_MODEL="offline",
        JARVIS_SESSION__PERSISTENCE_BACKEND=backend,
    )
    assert completed.returncode == 0, completed.stderr
    assert completed.stderr.count("[invalid]") == 2, completed.stderr
    assert "NUL" in completed.stderr and f"limit is {limits.PROMPT_MAX_CHARS}" in completed.stderr
    users = [e.content for e in get_store().get_messages("test-limits") if e.role == "user"]
    assert users == ["what is 6*7?"]


def test_the_chat_command_refuses_a_bad_agent(backend):
    completed = run_chat(
        "test-limits", "--agent", "a\x01" + "b" * 100, JARVIS_SESSION__PERSISTENCE_BACKEND=backend
    )
    assert completed.returncode != 0
    assert "the agent has 102 characters" in completed.stderr
    assert get_store().get_meta("test-limits") is None


def test_lines_typed_during_an_answer_are_queued_or_steer_it():
    completed = run_chat(
        "test-chat-talk",
        lines="wait 2 seconds\nwhat is 2+3\n/steer what is 5+6\n",
        JARVIS_MODEL="offline",
        QUEUE_SWEEP_SEC="3600",  # the queued line runs when the answer ends, not at a sweep
    )
    assert completed.returncode == 0, completed.stderr
    out = completed.stdout
    # Piped lines arrive at once: the first may still wait its turn when the second comes.
    assert re.search(r"\[queued #[12]: runs when the answer ends\]", out)
    assert "[steer sent: the answer takes it at its next step]" in out
    assert "5+6 = 11." in out and "2+3 = 5." in out
    history = get_store().get_messages("test-chat-talk")
    users = [(e.content, bool((e.data or {}).get("steer"))) for e in history if e.role == "user"]
    assert users == [("wait 2 seconds", False), ("what is 5+6", True), ("what is 2+3", False)]
    assert [e.data["status"] for e in history if e.kind == "turn_end"] == ["completed"] * 2
    assert_history_valid("test-chat-talk")
