"""One turn per session across processes; crashes and aborts from other processes.

The db backend runs on PostgreSQL (several workers share it in production); the jsonl
backend's flock works wherever the files are.
"""

import json
import signal

import pytest

from sessions_app.runtime.context.history import CRASH_RESULT_TEXT
from sessions_app.runtime.turn.turns import turn_abort, turn_run
from sessions_app.store import get_store
from tests.conftest import requires_postgres
from tests.helpers import GUARD_SEC, eventually, start_python

from .conftest import assert_history_valid

pytestmark = pytest.mark.django_db(transaction=True)

TURN = """
import json, time
from sessions_app.runtime.turn.turns import SessionBusy, turn_run
started = time.monotonic()
try:
    result = turn_run(session_id={session!r}, text={text!r})
    print(json.dumps({{"status": result.status, "elapsed": time.monotonic() - started}}))
except SessionBusy as busy:
    print(json.dumps({{"busy": busy.code, "message": str(busy), "elapsed": time.monotonic() - started}}))
"""


@pytest.fixture(params=[pytest.param("db", marks=requires_postgres), "jsonl"])
def backend(request, settings):
    settings.JARVIS_SESSION__PERSISTENCE_BACKEND = request.param
    get_store.cache_clear()
    return request.param


@pytest.fixture
def session(backend):
    return get_store().create("test-multi").id


def start_turn(backend, session, text, grace=3):
    return start_python(
        TURN.format(session=session, text=text),
        JARVIS_SESSION__PERSISTENCE_BACKEND=backend,
        BUSY_GRACE_SEC=grace,
    )


def outcome(child):
    out, err = child.communicate(timeout=GUARD_SEC)
    assert child.returncode == 0, err
    return json.loads(out.strip().splitlines()[-1])


def tool_running(session):
    return any(e.tool_calls for e in get_store().get_messages(session))


def turn_end_of(session, count=1):
    ends = [e for e in get_store().get_messages(session) if e.kind == "turn_end"]
    return ends if len(ends) >= count else None


def test_second_process_is_refused_after_the_grace_period(backend, session):
    # The first turn waits until the test aborts it: however slowly the second interpreter
    # starts, the first is still running when the second asks.
    first = start_turn(backend, session, "wait 120 seconds")
    eventually(lambda: tool_running(session), what="the first turn runs its tool")
    second = start_turn(backend, session, "hello", grace=0.5)
    refused = outcome(second)
    assert refused["busy"] == "session_busy"
    assert refused["message"] == "the previous request is still being processed"
    # A lower bound only: load can make the wait longer, never shorter.
    assert refused["elapsed"] >= 0.5, "it waited the grace period before giving up"
    assert turn_abort(session_id=session) is True
    assert outcome(first)["status"] == "aborted"
    starts = [e for e in get_store().get_messages(session) if e.kind == "turn_start"]
    assert len(starts) == 1, "the refused request stored nothing"
    assert_history_valid(session)


def test_racing_processes_take_turns_one_at_a_time(backend, session):
    # The grace is a guard: each process waits for the others' turns, however slowly the
    # interpreters start on a loaded machine.
    children = [
        start_turn(backend, session, f"wait 0.5 seconds ({n})", grace=GUARD_SEC) for n in range(3)
    ]
    assert [outcome(child)["status"] for child in children] == ["completed"] * 3
    open_turn = None
    for entry in get_store().get_messages(session):
        if entry.kind == "turn_start":
            assert open_turn is None, "a turn started while another was running"
            open_turn = entry.turn_id
        elif entry.turn_id:
            assert entry.turn_id == open_turn, "entries of two turns interleaved"
        if entry.kind == "turn_end":
            open_turn = None
    assert_history_valid(session)


def test_a_killed_turn_is_repaired_on_next_use_and_the_session_continues(
    backend, session, settings
):
    child = start_turn(backend, session, "wait 120 seconds")
    eventually(lambda: tool_running(session), what="the turn runs its tool")
    child.send_signal(signal.SIGKILL)
    child.wait(GUARD_SEC)
    # The dead holder's lease is taken over at once: with no grace at all, the next turn
    # still gets it (no waiting for it to expire).
    settings.BUSY_GRACE_SEC = 0
    result = turn_run(session_id=session, text="what did I say")
    assert result.status == "completed"
    assert "wait 120 seconds" in result.entries[2].content  # the user's message was kept
    history = get_store().get_messages(session)
    crashed = next(e for e in history if e.role == "tool")
    assert crashed.is_error and crashed.content == CRASH_RESULT_TEXT
    assert [e.data["status"] for e in history if e.kind == "turn_end"] == [
        "interrupted",
        "completed",
    ]
    assert_history_valid(session)


def test_abort_from_another_process_ends_the_turn(backend, session):
    child = start_turn(backend, session, "wait 120 seconds")
    eventually(lambda: tool_running(session), what="the turn runs its tool")
    assert turn_abort(session_id=session) is True
    (end,) = eventually(lambda: turn_end_of(session), what="the aborted turn ends")
    assert end.data["status"] == "aborted"
    assert outcome(child)["status"] == "aborted"
    assert_history_valid(session)
