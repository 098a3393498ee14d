"""A session deleted while its turn runs: nothing of that turn reaches the next session with the
same id — not through entries, titles, notices or memory — on both backends."""

import threading

import pytest
from rest_framework.test import APIClient

from memory_app.models import Episode, WorkingMemory
from sessions_app.runtime.loop.executors import run_for_sync_caller
from sessions_app.runtime.tools.base import ToolContext
from sessions_app.runtime.tools.registry import TOOLS, tool_run
from sessions_app.runtime.turn.lease import lease_acquire
from sessions_app.runtime.turn.turns import turn_run
from sessions_app.services import deletion
from sessions_app.store import NewEntry, SessionNotFound, get_store
from tests.sessions_app.runtime.conftest import assert_history_valid

pytestmark = pytest.mark.django_db(transaction=True)

SESSION = "shared-id"


@pytest.fixture
def users(alice, bob):
    return alice, bob


def client_of(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


class TurnInThread:
    """Runs a turn in a thread; `tool_started` is set once the model's tool call is stored, so
    the test acts while the tool runs — a handshake, not a sleep."""

    def __init__(self, *, session_id, text, owner_id):
        self.tool_started = threading.Event()
        self.outcome: dict = {}

        def on_event(event):
            entry = event.get("entry")
            if event["type"] == "entry" and entry.tool_calls:
                self.tool_started.set()

        def run():
            try:
                self.outcome["result"] = turn_run(
                    session_id=session_id, text=text, owner_id=owner_id, on_event=on_event
                )
            except Exception as error:  # noqa: BLE001 - the test inspects it
                self.outcome["error"] = error
            finally:
                self.tool_started.set()
                from django.db import connections

                connections.close_all()

        self.thread = threading.Thread(target=run)
        self.thread.start()

    def join(self):
        self.thread.join(60)
        assert not self.thread.is_alive()
        return self.outcome


def test_delete_stops_the_running_turn_and_the_next_owner_of_the_id_gets_nothing_of_it(
    users, backend
):
    alice, bob = users
    assert (
        client_of(alice).post("/api/sessions/", {"id": SESSION}, format="json").status_code == 201
    )
    turn = TurnInThread(
        session_id=SESSION,
        text="remember that my pin is 4242 and wait 30 seconds",
        owner_id=alice.id,
    )
    assert turn.tool_started.wait(30)

    response = client_of(alice).delete(f"/api/sessions/{SESSION}/")
    assert (response.status_code, response.json()) == (200, {"deleted": True, "exports": []})
    # The delete waited for the turn: it ended as aborted before the session went.
    outcome = turn.join()
    assert outcome["result"].status == "aborted"

    assert client_of(bob).post("/api/sessions/", {"id": SESSION}, format="json").status_code == 201
    assert get_store().get_messages(SESSION) == []
    assert not Episode.objects.filter(session_id=SESSION).exists()
    assert not WorkingMemory.objects.filter(session_id=SESSION).exists()
    # Bob's conversation works and stays his own.
    assert turn_run(session_id=SESSION, text="what is 2+3", owner_id=bob.id).status == "completed"
    assert_history_valid(SESSION)
    assert [e.content for e in get_store().get_messages(SESSION) if e.role == "user"] == [
        "what is 2+3"
    ]


def test_a_turn_that_lost_its_session_writes_nothing_into_the_new_one(users, backend):
    """The lease was lost (its worker was taken for dead) and the session deleted and created
    again by someone else: every write of the old turn is refused."""
    alice, bob = users
    store = get_store()
    store.create(SESSION, owner_id=alice.id)
    turn = TurnInThread(session_id=SESSION, text="wait 30 seconds", owner_id=alice.id)
    assert turn.tool_started.wait(30)

    store.delete(SESSION)  # as a delete would, once the turn's worker counts as dead
    store.create(SESSION, owner_id=bob.id)
    from sessions_app.runtime.turn.turns import turn_abort

    turn_abort(session_id=SESSION)  # the old turn wakes up and tries to store its results
    outcome = turn.join()

    assert isinstance(outcome.get("error"), SessionNotFound)
    assert store.get_messages(SESSION) == []
    assert store.get_meta(SESSION).owner_id == bob.id
    assert store.get_meta(SESSION).title == ""
    assert not Episode.objects.filter(session_id=SESSION).exists()


def test_store_writes_with_an_old_incarnation_are_refused(users, backend):
    alice, bob = users
    store = get_store()
    old = store.create(SESSION, owner_id=alice.id).incarnation
    store.delete(SESSION)
    new = store.create(SESSION, owner_id=bob.id).incarnation
    assert old and new and old != new

    entry = NewEntry(role="user", content="hello")
    with pytest.raises(SessionNotFound):
        store.append(SESSION, [entry], incarnation=old)
    with pytest.raises(SessionNotFound):
        store.set_title(SESSION, "stolen", incarnation=old)
    with pytest.raises(SessionNotFound):
        store.append_proactive(SESSION, "m1", "ring", incarnation=old)
    with pytest.raises(SessionNotFound), store.fenced(SESSION, old):
        pass
    assert store.get_messages(SESSION) == [] and store.get_proactive(SESSION) == []

    assert [r.seq for r in store.append(SESSION, [entry], incarnation=new)] == [1]
    assert store.set_title(SESSION, "mine", incarnation=new).title == "mine"


def test_a_tool_writing_memory_for_a_replaced_session_is_refused(users, backend):
    alice, bob = users
    store = get_store()
    old = store.create(SESSION, owner_id=alice.id).incarnation
    store.delete(SESSION)
    store.create(SESSION, owner_id=bob.id)
    context = ToolContext(session_id=SESSION, fenced=lambda: store.fenced(SESSION, old))
    call = {"id": "c1", "name": "remember", "arguments": '{"key": "pin", "value": "4242"}'}
    text, is_error = run_for_sync_caller(tool_run, call=call, context=context, tools=TOOLS)
    assert is_error
    assert not WorkingMemory.objects.filter(session_id=SESSION).exists()


def test_delete_is_409_session_busy_when_the_turn_does_not_end_in_time(users, backend, settings):
    alice, _ = users
    settings.BUSY_GRACE_SEC = 0.2
    get_store().create(SESSION, owner_id=alice.id)
    # A turn that cannot be stopped in time: its lease is held and never released here.
    lease = lease_acquire(session_id=SESSION, wait_sec=0)
    try:
        response = client_of(alice).delete(f"/api/sessions/{SESSION}/")
        assert response.status_code == 409
        assert response.json()["code"] == "session_busy"
        assert get_store().get_meta(SESSION) is not None
    finally:
        lease.release()
    assert deletion.session_delete(session_id=SESSION, owner_id=alice.id) is True
