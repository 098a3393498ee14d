import pytest

from sessions_app.runtime.history import (
    project_anthropic,
    project_openai,
    validate_anthropic,
    validate_openai,
)
from sessions_app.store import get_store


@pytest.fixture
def session(backend):
    return get_store().create("test-turns", agent="jarvis").id


def assert_history_valid(session_id: str) -> None:
    """What a user needs: the stored history can be sent to either provider."""
    history = get_store().get_messages(session_id)
    validate_openai(project_openai(history, "system"))
    validate_anthropic(project_anthropic(history, "system")[1])
    calls = [c["id"] for e in history if e.tool_calls for c in e.tool_calls]
    results = [e.tool_call_id for e in history if e.role == "tool"]
    assert sorted(calls) == sorted(results), "every call has exactly one result"
