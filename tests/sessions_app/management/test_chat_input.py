"""`manage.py chat` refuses what the API and the WebSocket refuse: bytes a terminal could not
decode (they reach Python as lone surrogates) — and the conversation goes on —, a new
session of an agent that does not exist, a sub-agent's id."""

import subprocess
import sys

import pytest
from django.core.management import CommandError, call_command

from sessions_app.store import get_store
from tests.helpers import GUARD_SEC, REPO, child_env

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_line_that_is_not_utf8_is_refused_and_the_conversation_goes_on():
    # A terminal in the C locale: Python decodes stdin as UTF-8 and keeps undecodable bytes
    # as lone surrogates instead of failing.
    completed = subprocess.run(
        [sys.executable, "manage.py", "chat", "test-bytes"],
        input=b"caf\xe9 au lait\nhello\n",
        cwd=REPO,
        env=child_env(LC_ALL="C", JARVIS_MODEL="offline"),
        capture_output=True,
        timeout=GUARD_SEC,
        check=False,
    )
    stderr = completed.stderr.decode(errors="replace")
    assert completed.returncode == 0, stderr
    assert "[invalid] the prompt may not contain a lone surrogate (U+DCE9)" in stderr
    history = get_store().get_messages("test-bytes")
    assert [e.content for e in history if e.role == "user"] == ["hello"]


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["s-chat", "--agent", "nope"], "no agent named 'nope'"),
        (["agent_researcher__s-chat", "--user", "alice"], "made by the server"),
    ],
)
def test_chat_creates_no_session_the_api_would_refuse(alice, args, words):
    with pytest.raises(CommandError, match=words):
        call_command("chat", *args)
    assert get_store().get_meta(args[0]) is None
