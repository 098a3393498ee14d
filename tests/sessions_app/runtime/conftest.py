import contextvars
import threading

import pytest

from sessions_app.runtime.context.history import (
    project_anthropic,
    project_openai,
    validate_anthropic,
    validate_openai,
)
from sessions_app.runtime.turn.turns import turn_abort, turn_run
from sessions_app.store import get_store
from tests.fakes.llm_server import Hold
from tests.helpers import GUARD_SEC


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


def stopped_while_the_model_holds(
    provider, session, hold: Hold, said_text: str, context: contextvars.Context | None = None
):
    """Run a turn whose answer the model holds after `said_text`, press Stop, and return the
    turn's result once it ended — the model still holding (released only afterwards). The
    turn runs in `context` when given (a turn started at once, runtime.loop.beside)."""
    events = []
    said = threading.Event()

    def on_event(event):
        events.append(event)
        text = "".join(e["text"] for e in events if e["type"] == "delta")
        if text == said_text:
            said.set()

    outcome = {}

    def run():
        outcome["result"] = (context or contextvars.copy_context()).run(
            turn_run, session_id=session, text="count", provider=provider, on_event=on_event
        )

    thread = threading.Thread(target=run)
    thread.start()
    try:
        if said_text:
            assert said.wait(GUARD_SEC), "the first words never arrived"
        assert hold.reached.wait(GUARD_SEC), "the model never reached its hold"
        turn_abort(session_id=session)
        thread.join(GUARD_SEC)
        assert not thread.is_alive(), "the Stop waited for the model's next piece"
    finally:
        hold.release()
        thread.join(GUARD_SEC)
    return outcome["result"], events
