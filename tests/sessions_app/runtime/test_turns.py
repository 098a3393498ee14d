"""The turn loop on both backends: statuses, pairing on every ending, repair, busy, abort."""

import threading
import time

import pytest
from django.db import transaction

from sessions_app.core.signals import turn_finished
from sessions_app.runtime.context.history import CRASH_RESULT_TEXT
from sessions_app.runtime.turn.lease import TurnLease
from sessions_app.runtime.turn.turns import (
    SessionBusy,
    session_repair,
    turn_abort,
    turn_abort_local_of_owner,
    turn_run,
)
from sessions_app.selectors.turns import request_header_of
from sessions_app.store import SessionNotFound, get_store
from tests.builders import crash_mid_step
from tests.handshakes import hold_waits, lease_contention, meeting_waits, signal_waits
from tests.helpers import GUARD_SEC

from .conftest import assert_history_valid

pytestmark = pytest.mark.django_db(transaction=True)


def kinds(entries):
    return [(e.kind, e.role) if e.kind == "message" else (e.kind,) for e in entries]


def test_plain_answer_streams_and_stores_the_whole_turn(session):
    events = []
    result = turn_run(session_id=session, text="hello there", on_event=events.append)
    assert result.status == "completed"
    assert kinds(result.entries) == [
        ("turn_start",),
        ("message", "user"),
        ("message", "assistant"),
        ("turn_end",),
    ]
    start, user, answer, end = result.entries
    assert start.data["model"] == "offline" and start.data["agent"] == "jarvis"
    header = request_header_of(start)
    assert header["parameters"] == {} and header["system"]
    calculator = next(tool for tool in header["tools"] if tool["name"] == "calculator")
    assert calculator["description"] and calculator["parameters"]["required"] == ["expression"]
    assert user.content == "hello there"
    assert "hello there" in answer.content
    assert answer.model == "offline" and answer.usage["output_tokens"] > 0
    assert end.data == {"status": "completed", "error": ""}
    deltas = "".join(e["text"] for e in events if e["type"] == "delta")
    assert deltas == answer.content
    assert [e["type"] for e in events][0] == "agent_start"
    assert events[-1] == {
        "type": "agent_end",
        "turn_id": result.turn_id,
        "status": "completed",
        "last_seq": end.seq,
    }
    stored = [e["entry"] for e in events if e["type"] == "entry"]
    assert stored == get_store().get_messages(session)
    assert_history_valid(session)


def test_two_requests_in_one_message_run_two_tools_concurrently(session, monkeypatch):
    # The two waits meet before waiting: run one after the other, the first never returns.
    meeting_waits(monkeypatch, parties=2)
    result = turn_run(session_id=session, text="wait 1 seconds and what is 2+3 and wait 1 s")
    assert result.status == "completed"
    assistant = result.entries[2]
    assert [c["name"] for c in assistant.tool_calls] == ["wait", "calculator", "wait"]
    results = result.entries[3:6]
    # One result per call, contiguous, in call order.
    assert [r.tool_call_id for r in results] == [c["id"] for c in assistant.tool_calls]
    assert [r.content for r in results] == ["waited 1 second", "5", "waited 1 second"]
    assert "2+3 = 5." in result.entries[6].content
    assert_history_valid(session)


def test_step_limit_ends_with_max_turns_and_no_unanswered_call(session, settings):
    settings.MAX_STEPS = 1
    result = turn_run(session_id=session, text="what is 6*7")
    assert result.status == "max_turns"
    assert "limit of 1" in result.error
    assert [r.content for r in result.entries if r.role == "tool"] == ["42"]
    assert_history_valid(session)


def test_tool_failure_is_a_result_the_model_reads(session):
    result = turn_run(session_id=session, text="what is 1/0")
    assert result.status == "completed"
    tool = next(e for e in result.entries if e.role == "tool")
    assert tool.is_error and "division by zero" in tool.content
    assert "failed" in result.entries[-2].content
    assert_history_valid(session)


def _long_wait_running(session: str, waiting: threading.Event):
    """A turn in a thread, inside a 300 s `wait` once this returns: (thread, outcome)."""
    outcome = {}

    def run():
        outcome["result"] = turn_run(session_id=session, text="wait 300 seconds")

    thread = threading.Thread(target=run)
    thread.start()
    assert waiting.wait(GUARD_SEC), "the wait tool never ran"
    return thread, outcome


def test_abort_stops_a_running_wait(session, monkeypatch):
    waiting = signal_waits(monkeypatch)
    thread, outcome = _long_wait_running(session, waiting)
    assert turn_abort(session_id=session) is True
    # The wait would last 300 s: a turn that ends within the guard was stopped by the abort.
    thread.join(GUARD_SEC)
    assert not thread.is_alive(), "the abort did not stop the wait"
    result = outcome["result"]
    assert result.status == "aborted"
    tool = next(e for e in result.entries if e.role == "tool")
    assert tool.is_error and tool.content.startswith("aborted")
    assert_history_valid(session)
    assert turn_abort(session_id=session) is False  # nothing runs any more


def test_a_tab_stops_its_owners_turn_on_its_worker_and_no_one_elses(
    backend, alice, bob, monkeypatch
):
    """The Stop of a socket on the turn's own worker sets the turn's flag before any query;
    the turn knows its owner, so another user's Stop (were it to get here) changes nothing."""
    session = get_store().create("owned-turn", agent="jarvis", owner_id=alice.id).id
    waiting = signal_waits(monkeypatch)
    thread, outcome = _long_wait_running(session, waiting)
    assert turn_abort_local_of_owner(session_id=session, owner_id=bob.id) is False
    assert thread.is_alive(), "another user's Stop ended the turn"
    assert turn_abort_local_of_owner(session_id=session, owner_id=alice.id) is True
    thread.join(GUARD_SEC)
    assert not thread.is_alive(), "the owner's Stop did not stop the wait"
    assert outcome["result"].status == "aborted"
    assert_history_valid(session)
    assert turn_abort_local_of_owner(session_id=session, owner_id=alice.id) is False


def test_a_stop_pressed_while_the_turn_starts_stops_it_before_its_model_call(
    backend, alice, settings, monkeypatch
):
    """Between the prompt and the turn's lease (a busy worker starting other turns, another
    worker's turn of the session finishing) a Stop flags the starting turn: it stores the
    message and ends aborted without calling the model. The tab's check answers False, so
    the Stop goes on to the turn that holds the lease, wherever it runs."""
    settings.BUSY_GRACE_SEC = GUARD_SEC
    session = get_store().create("stop-at-start", agent="jarvis", owner_id=alice.id).id
    elsewhere = TurnLease.for_session(session).acquire(wait_sec=0)
    refused = lease_contention(monkeypatch)
    outcome = {}

    def run():
        outcome["result"] = turn_run(session_id=session, text="what is 2+3", owner_id=alice.id)

    thread = threading.Thread(target=run)
    thread.start()
    assert refused.wait(GUARD_SEC), "the turn never tried to take the lease"
    assert turn_abort_local_of_owner(session_id=session, owner_id=alice.id) is False
    assert turn_abort(session_id=session) is True  # the lease holder's mark
    elsewhere.release()
    thread.join(GUARD_SEC)
    assert not thread.is_alive(), "the starting turn never ended"
    result = outcome["result"]
    assert result.status == "aborted"
    assert [e.role for e in result.entries if e.role] == ["user"], "the model was called"
    assert_history_valid(session)


def test_second_request_waits_for_the_grace_period_then_is_refused(session, settings, monkeypatch):
    settings.BUSY_GRACE_SEC = 0.3
    held = hold_waits(monkeypatch)  # the first turn runs until the test lets it finish
    outcome = {}

    def run():
        outcome["result"] = turn_run(session_id=session, text="wait 0.1 seconds")

    thread = threading.Thread(target=run)
    thread.start()
    assert held.started.wait(GUARD_SEC), "the first turn never reached its tool"
    started = time.monotonic()
    with pytest.raises(SessionBusy, match="the previous request is still being processed"):
        turn_run(session_id=session, text="hello")
    # A lower bound only: load can make the wait longer, never shorter.
    assert time.monotonic() - started >= 0.3, "it gave up before the grace period"
    held.release()
    thread.join(GUARD_SEC)
    assert outcome["result"].status == "completed"
    settings.BUSY_GRACE_SEC = 3
    assert turn_run(session_id=session, text="hello").status == "completed"
    assert_history_valid(session)


def test_a_request_that_arrives_during_wrap_up_waits_and_runs(session, settings, monkeypatch):
    # The grace is a guard here: what is tested is that the second request waits, then runs.
    settings.BUSY_GRACE_SEC = GUARD_SEC
    held = hold_waits(monkeypatch)
    contended = lease_contention(monkeypatch)
    first = threading.Thread(
        target=turn_run, kwargs={"session_id": session, "text": "wait 0.1 seconds"}
    )
    first.start()
    assert held.started.wait(GUARD_SEC), "the first turn never reached its tool"
    outcome = {}

    def second():
        outcome["result"] = turn_run(session_id=session, text="what did I say")

    waiting = threading.Thread(target=second)
    waiting.start()
    # The second request found the session busy and waits; only now may the first finish.
    assert contended.wait(GUARD_SEC), "the second request never asked for the session"
    held.release()
    first.join(GUARD_SEC)
    waiting.join(GUARD_SEC)
    assert outcome["result"].status == "completed"
    ends = [e for e in get_store().get_messages(session) if e.kind == "turn_end"]
    assert len(ends) == 2
    assert_history_valid(session)


def test_repair_closes_a_dead_turn_once(session):
    crash_mid_step(session)
    received = []
    turn_finished.connect(lambda **kw: received.append(kw), weak=False, dispatch_uid="t-repair")
    try:
        repaired = session_repair(session_id=session)
    finally:
        turn_finished.disconnect(dispatch_uid="t-repair")
    assert [(e.tool_call_id, e.content, e.is_error) for e in repaired[:2]] == [
        ("c1", CRASH_RESULT_TEXT, True),
        ("c2", CRASH_RESULT_TEXT, True),
    ]
    assert repaired[2].kind == "turn_end" and repaired[2].data["status"] == "interrupted"
    assert session_repair(session_id=session) == []
    assert received[0]["status"] == "interrupted" and received[0]["turn_id"] == "t-dead"
    assert received[0]["entries"][0].kind == "turn_start"
    assert_history_valid(session)


def test_concurrent_repairers_repair_once(session, settings):
    crash_mid_step(session)
    barrier = threading.Barrier(2)
    results = []

    def repair():
        barrier.wait()
        results.append(len(session_repair(session_id=session)))

    threads = [threading.Thread(target=repair) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(GUARD_SEC)
    assert sorted(results) == [0, 3]
    assert_history_valid(session)


def test_next_turn_repairs_first_and_keeps_the_users_message(session):
    crash_mid_step(session)
    result = turn_run(session_id=session, text="what did I say")
    assert result.status == "completed"
    history = get_store().get_messages(session)
    statuses = [e.data["status"] for e in history if e.kind == "turn_end"]
    assert statuses == ["interrupted", "completed"]
    assert "wait 5 s and what is 2+2" in result.entries[2].content
    assert_history_valid(session)


def test_turn_finished_is_sent_inside_the_transaction_of_the_turn_end(session):
    seen = []

    def receiver(**kwargs):
        seen.append((kwargs, transaction.get_connection().in_atomic_block))

    turn_finished.connect(receiver, weak=False, dispatch_uid="t-signal")
    try:
        result = turn_run(session_id=session, text="what is 2+2", owner_id=None)
    finally:
        turn_finished.disconnect(dispatch_uid="t-signal")
    ((kwargs, in_atomic),) = seen
    assert in_atomic
    assert kwargs["turn_id"] == result.turn_id and kwargs["status"] == "completed"
    assert [e.seq for e in kwargs["entries"]] == [e.seq for e in result.entries]


def test_failing_receiver_leaves_the_turn_open_for_repair(session):
    def receiver(**kwargs):
        raise RuntimeError("memory is down")

    turn_finished.connect(receiver, weak=False, dispatch_uid="t-fail")
    try:
        with pytest.raises(RuntimeError):
            turn_run(session_id=session, text="hi")
    finally:
        turn_finished.disconnect(dispatch_uid="t-fail")
    history = get_store().get_messages(session)
    if get_store().__class__.__name__.startswith("Db"):
        assert history[-1].kind != "turn_end"  # rolled back with the receiver
    assert turn_run(session_id=session, text="again").status == "completed"
    assert_history_valid(session)


def test_missing_session_and_empty_text_are_refused(session):
    with pytest.raises(SessionNotFound):
        turn_run(session_id="test-nope", text="hi")
    with pytest.raises(ValueError):
        turn_run(session_id=session, text="   ")


def test_title_from_message_is_the_first_line_cut_at_a_word():
    from sessions_app.runtime.turn.turns import title_from_message

    assert title_from_message("  what is   2+2?\nthanks") == "what is 2+2?"
    long = "please plan a weekend in Porto with trains, food, museums and a day at the beach"
    title = title_from_message(long)
    assert title.endswith("…") and len(title) <= 61 and long.startswith(title[:-1])


def test_a_conversation_is_named_after_its_first_request(session):
    turn_run(session_id=session, text="Plan a weekend in Porto\nwith trains")
    turn_run(session_id=session, text="and a day at the beach")
    assert get_store().get_meta(session).title == "Plan a weekend in Porto"
