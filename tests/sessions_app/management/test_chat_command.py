"""`manage.py chat` holds a conversation from piped input and leaves a valid history."""

import subprocess
import sys

import pytest

from sessions_app.store import get_store
from tests.helpers import REPO, child_env

from .conftest import assert_history_valid

pytestmark = pytest.mark.django_db(transaction=True)


def test_chat_command_holds_a_conversation_from_piped_input():
    lines = "hello\nwhat is 2+3 and what time is it\n\nwhat did I say\n/quit\nnever sent\n"
    completed = subprocess.run(
        [sys.executable, "manage.py", "chat", "test-chat"],
        input=lines,
        cwd=REPO,
        env=child_env(JARVIS_MODEL="offline"),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
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
    completed = subprocess.run(
        [sys.executable, "manage.py", "chat", "test-chat-approval"],
        input="forget my color\n/quit\n",
        cwd=REPO,
        env=child_env(JARVIS_MODEL="offline", APPROVAL_TIMEOUT_SEC="0.2"),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr
    assert "? forget waits for approval" in completed.stdout
    assert "✗ forget: not run: no answer to the approval request came within 0.2 seconds" in (
        completed.stdout
    )
    assert_history_valid("test-chat-approval")
