"""Tool calls that wait for the person's approval, on both backends: every ending — allow,
deny, timeout, abort, delete, a dead worker — leaves one result for the call that says which,
and a history both providers accept."""

import threading

import pytest
from django.db import connections

from memory_app.services import working_memory_recall, working_memory_remember
from sessions_app import selectors
from sessions_app.models import ToolApproval
from sessions_app.runtime.context.history import CRASH_RESULT_TEXT
from sessions_app.runtime.turn.approvals import (
    ABORTED_TEXT,
    DENIED_TEXT,
    INTERRUPTED_TEXT,
    TIMED_OUT_TEXT,
    ApprovalClosed,
    ApprovalNotFound,
)
from sessions_app.runtime.turn.turns import session_repair, turn_abort, turn_run
from sessions_app.services import approvals, deletion
from sessions_app.store import NewEntry, SessionNotFound, get_store
from tests.helpers import GUARD_SEC

from .conftest import assert_history_valid

pytestmark = pytest.mark.django_db(transaction=True)

WAIT = GUARD_SEC


@pytest.fixture
def owner(backend, alice):
    return alice


@pytest.fixture
def session(owner):
    session_id = get_store().create("approvals", owner_id=owner.id, agent="jarvis").id
    working_memory_remember(session_id=session_id, key="color", value="blue")
    return session_id


class TurnInThread:
    """A turn run by another thread, like a worker's; `asked` is set by approval_request."""

    def __init__(self, session_id: str, owner_id: int, text: str = "forget my color"):
        self.events: list[dict] = []
        self.asked = threading.Event()
        self.result = None
        self.thread = threading.Thread(target=self._run, args=(session_id, owner_id, text))
        self.thread.start()

    def _on_event(self, event):
        self.events.append(event)
        if event["type"] == "approval_request":
            self.asked.set()

    def _run(self, session_id, owner_id, text):
        try:
            self.result = turn_run(
                session_id=session_id, text=text, owner_id=owner_id, on_event=self._on_event
            )
        finally:
            connections.close_all()  # the thread's own connection, or the test DB stays in use

    def request(self) -> dict:
        assert self.asked.wait(WAIT), "no approval_request"
        return next(e for e in self.events if e["type"] == "approval_request")

    def finish(self):
        self.thread.join(WAIT)
        assert not self.thread.is_alive()
        return self.result

    def ending(self) -> dict:
        return next(e for e in self.events if e["type"] == "approval_end")


def the_result(result, call_id):
    results = [e for e in result.entries if e.role == "tool" and e.tool_call_id == call_id]
    assert len(results) == 1, "exactly one result for the call"
    return results[0]


def test_allow_runs_the_tool(session, owner):
    turn = TurnInThread(session, owner.id)
    request = turn.request()
    assert request["tool"] == "forget" and request["arguments"] == {"key": "color"}
    # The call is stored before anyone is asked: a crash now still leaves it in the history.
    stored = get_store().get_messages(session)
    assert stored[-1].tool_calls[0]["id"] == request["call_id"]
    assert working_memory_recall(session_id=session) == {"color": "blue"}

    status = approvals.approval_decide(
        session_id=session, owner_id=owner.id, call_id=request["call_id"], allow=True
    )
    result = turn.finish()
    assert status == "allowed" and result.status == "completed"
    answer = the_result(result, request["call_id"])
    assert not answer.is_error and answer.content == "forgot color"
    assert working_memory_recall(session_id=session) == {}
    assert turn.ending()["status"] == "allowed"
    assert result.entries[-2].content == "I forgot your color."
    assert_history_valid(session)


def test_deny_gives_an_error_result_and_keeps_the_memory(session, owner):
    turn = TurnInThread(session, owner.id)
    request = turn.request()
    approvals.approval_decide(
        session_id=session, owner_id=owner.id, call_id=request["call_id"], allow=False
    )
    result = turn.finish()
    answer = the_result(result, request["call_id"])
    assert answer.is_error and answer.content == DENIED_TEXT
    assert working_memory_recall(session_id=session) == {"color": "blue"}
    assert ToolApproval.objects.get(call_id=request["call_id"]).status == "denied"
    assert_history_valid(session)


def test_no_answer_in_time_gives_an_error_result(session, owner, settings):
    settings.APPROVAL_TIMEOUT_SEC = 0.2
    result = turn_run(session_id=session, text="forget my color", owner_id=owner.id)
    call_id = next(e for e in result.entries if e.tool_calls).tool_calls[0]["id"]
    answer = the_result(result, call_id)
    assert answer.is_error and answer.content == TIMED_OUT_TEXT.format(seconds=0.2)
    assert ToolApproval.objects.get(call_id=call_id).status == "timed_out"
    assert working_memory_recall(session_id=session) == {"color": "blue"}
    with pytest.raises(ApprovalClosed):
        approvals.approval_decide(
            session_id=session, owner_id=owner.id, call_id=call_id, allow=True
        )
    assert_history_valid(session)


def test_abort_while_waiting_ends_the_turn_with_an_error_result(session, owner):
    turn = TurnInThread(session, owner.id)
    request = turn.request()
    assert turn_abort(session_id=session) is True
    result = turn.finish()
    assert result.status == "aborted"
    answer = the_result(result, request["call_id"])
    assert answer.is_error and answer.content == ABORTED_TEXT
    assert ToolApproval.objects.get(call_id=request["call_id"]).status == "aborted"
    assert selectors.approvals_pending(session_id=session) == []
    assert working_memory_recall(session_id=session) == {"color": "blue"}
    assert_history_valid(session)


def test_delete_while_waiting_ends_the_turn_before_the_session_goes(session, owner):
    turn = TurnInThread(session, owner.id)
    request = turn.request()
    assert deletion.session_delete(session_id=session, owner_id=owner.id) is True
    result = turn.finish()
    assert result.status == "aborted"
    assert the_result(result, request["call_id"]).content == ABORTED_TEXT
    assert get_store().get_meta(session) is None
    assert not ToolApproval.objects.filter(session_id=session).exists()


def test_a_decision_written_by_another_worker_is_honoured(session, owner):
    """Another worker writes the row and cannot wake this process's future: the lease
    keeper's poll finds the decision."""
    turn = TurnInThread(session, owner.id)
    request = turn.request()
    assert ToolApproval.objects.filter(call_id=request["call_id"], status="pending").update(
        status="allowed"
    )
    result = turn.finish()
    assert the_result(result, request["call_id"]).content == "forgot color"
    assert working_memory_recall(session_id=session) == {}


def test_the_pending_request_is_in_the_snapshot_until_answered(session, owner):
    turn = TurnInThread(session, owner.id)
    request = turn.request()
    snapshot = selectors.session_snapshot(session_id=session, owner_id=owner.id)
    assert [(a["call_id"], a["tool"], a["arguments"]) for a in snapshot["approvals"]] == [
        (request["call_id"], "forget", {"key": "color"})
    ]
    approvals.approval_decide(
        session_id=session, owner_id=owner.id, call_id=request["call_id"], allow=False
    )
    turn.finish()
    assert selectors.session_snapshot(session_id=session, owner_id=owner.id)["approvals"] == []


def test_decide_refuses_unknown_calls_second_answers_and_other_users(session, owner, bob):
    turn = TurnInThread(session, owner.id)
    call_id = turn.request()["call_id"]
    with pytest.raises(SessionNotFound):
        approvals.approval_decide(session_id=session, owner_id=bob.id, call_id=call_id, allow=True)
    with pytest.raises(ApprovalNotFound):
        approvals.approval_decide(session_id=session, owner_id=owner.id, call_id="nope", allow=True)
    approvals.approval_decide(session_id=session, owner_id=owner.id, call_id=call_id, allow=False)
    with pytest.raises(ApprovalClosed):
        approvals.approval_decide(
            session_id=session, owner_id=owner.id, call_id=call_id, allow=True
        )
    assert the_result(turn.finish(), call_id).content == DENIED_TEXT


def test_repair_says_the_worker_stopped_while_the_call_waited_for_approval(session, owner):
    """What a worker killed while waiting leaves: the call stored, a pending row, no result."""
    store = get_store()
    store.append(
        session,
        [
            NewEntry(kind="turn_start", turn_id="t-dead"),
            NewEntry(role="user", content="forget my color and what is 2+2", turn_id="t-dead"),
            NewEntry(
                role="assistant",
                turn_id="t-dead",
                tool_calls=[
                    {"id": "c-forget", "name": "forget", "arguments": '{"key": "color"}'},
                    {"id": "c-calc", "name": "calculator", "arguments": '{"expression": "2+2"}'},
                ],
            ),
        ],
    )
    ToolApproval.objects.create(
        session_id=session,
        turn_id="t-dead",
        call_id="c-forget",
        tool="forget",
        arguments={"key": "color"},
        worker_id="gone:1:x",
        created_at=store.get_meta(session).created_at,
    )
    repaired = session_repair(session_id=session)
    assert [(e.tool_call_id, e.content, e.is_error) for e in repaired[:2]] == [
        ("c-forget", INTERRUPTED_TEXT, True),
        ("c-calc", CRASH_RESULT_TEXT, True),
    ]
    assert ToolApproval.objects.get(call_id="c-forget").status == "interrupted"
    assert session_repair(session_id=session) == []
    assert_history_valid(session)
