"""Each user action is one service, and the service itself refuses a session that is not the
caller's — exactly like a missing one, with SessionNotFound — before it writes anything or
tells any open tab. Both store backends."""

import threading
from pathlib import Path

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from channels.layers import channel_layers, get_channel_layer
from django.conf import settings
from django.core.management import CommandError, call_command
from django.db import connections

from memory_app.models import CompactionSummary
from sessions_app.core.ids import group_name
from sessions_app.services import approvals, sessions, turns
from sessions_app.store import SessionNotFound, get_store

pytestmark = pytest.mark.django_db(transaction=True)

WAIT = 10
BOBS = "bobs"


@pytest.fixture(autouse=True)
def _fresh_channel_layer():
    # The in-memory layer keeps queues bound to the event loop of the test that made them.
    channel_layers.backends.clear()
    yield
    channel_layers.backends.clear()


@pytest.fixture
def bobs_session(backend, bob):
    """Bob's session with three turns: enough history to compact."""
    sessions.session_create(owner_id=bob.id, session_id=BOBS)
    for text in ("what is 2+3", "what is 6*7", "what did I say"):
        assert turns.turn_send(session_id=BOBS, owner_id=bob.id, text=text).status == ("completed")
    return BOBS


def in_a_thread(function, **kwargs):
    """`function` run in a thread of its own, whose database connection is closed after."""

    def run():
        try:
            return function(**kwargs)
        finally:
            connections.close_all()  # or the test database stays in use

    return sync_to_async(run, thread_sensitive=False)()


def what_is_stored(session_id):
    store = get_store()
    return store.get_meta(session_id), store.get_messages(session_id)


def export_files() -> list[Path]:
    root = Path(settings.EXPORTS_DIR)
    return [path for path in root.rglob("*") if path.is_file()] if root.exists() else []


def every_action(session_id, owner_id):
    """Each user action on `session_id`, as `owner_id` would ask for it."""
    return {
        "turn_send": lambda: turns.turn_send(
            session_id=session_id, owner_id=owner_id, text="hello"
        ),
        "turn_send_async": lambda: async_to_sync(turns.turn_send_async)(
            session_id=session_id, owner_id=owner_id, text="hello"
        ),
        "turn_abort": lambda: turns.turn_abort(session_id=session_id, owner_id=owner_id),
        "turn_abort_async": lambda: async_to_sync(turns.turn_abort_async)(
            session_id=session_id, owner_id=owner_id
        ),
        "session_compact": lambda: sessions.session_compact(
            session_id=session_id, owner_id=owner_id
        ),
        "session_cost": lambda: sessions.session_cost(session_id=session_id, owner_id=owner_id),
        "session_export": lambda: sessions.session_export(
            session_id=session_id, owner_id=owner_id, fmt="md"
        ),
    }


def test_another_users_session_is_not_found_and_nothing_is_written(bobs_session, alice):
    before = what_is_stored(bobs_session)
    # Alice, and the terminal chat without --user (no owner), are both strangers here.
    for stranger in (alice.id, None):
        for name, action in every_action(bobs_session, stranger).items():
            with pytest.raises(SessionNotFound):
                action()
            assert what_is_stored(bobs_session) == before, f"{name} wrote to Bob's session"
    assert not CompactionSummary.objects.exists()
    assert export_files() == []


def test_a_missing_session_is_not_found_and_not_created(backend, alice):
    for name, action in every_action("nobody-has-this", alice.id).items():
        with pytest.raises(SessionNotFound):
            action()
        assert get_store().get_meta("nobody-has-this") is None, f"{name} created the session"
    assert export_files() == []


def test_the_owner_gets_each_action_done(bobs_session, bob):
    compaction = sessions.session_compact(session_id=bobs_session, owner_id=bob.id)
    assert compaction.kind == "compaction"
    assert get_store().get_messages(bobs_session)[-1].seq == compaction.seq
    assert sessions.session_cost(session_id=bobs_session, owner_id=bob.id)["models"]
    export = sessions.session_export(session_id=bobs_session, owner_id=bob.id, fmt="md")
    assert export_files() == [Path(settings.EXPORTS_DIR) / str(bob.id) / "bobs.md"]
    assert "what did I say" in export.content.decode()
    assert turns.turn_abort(session_id=bobs_session, owner_id=bob.id) is False


def test_an_operator_command_acts_on_any_users_session(bobs_session, bob, capsys):
    call_command("compact_session", bobs_session)
    assert "compacted bobs" in capsys.readouterr().out
    assert get_store().get_messages(bobs_session)[-1].kind == "compaction"
    call_command("export_session", bobs_session)
    assert capsys.readouterr().out.strip() == str(
        Path(settings.EXPORTS_DIR) / str(bob.id) / "bobs.md"
    )


def test_the_terminal_chat_without_a_user_keeps_out_of_a_users_session(bobs_session):
    before = what_is_stored(bobs_session)
    with pytest.raises(CommandError, match="--user"):
        call_command("chat", bobs_session)
    assert what_is_stored(bobs_session) == before


class TurnWaitingForApproval:
    """Bob's turn in another thread, waiting for his answer to `forget`: it ends "completed"
    only if nothing aborted it meanwhile."""

    def __init__(self, session_id: str, owner_id: int):
        self.asked = threading.Event()
        self.events: list[dict] = []
        self.result = None
        self.thread = threading.Thread(target=self._run, args=(session_id, owner_id))
        self.thread.start()

    def _on_event(self, event):
        self.events.append(event)
        if event["type"] == "approval_request":
            self.asked.set()

    def _run(self, session_id, owner_id):
        try:
            self.result = turns.turn_send(
                session_id=session_id,
                owner_id=owner_id,
                text="forget my color",
                on_event=self._on_event,
            )
        finally:
            connections.close_all()  # the thread's own connection, or the test DB stays in use

    def call_id(self) -> str:
        assert self.asked.wait(WAIT), "no approval_request"
        return next(e for e in self.events if e["type"] == "approval_request")["call_id"]

    def finish(self):
        self.thread.join(WAIT)
        assert not self.thread.is_alive()
        return self.result


def test_a_strangers_abort_leaves_the_owners_turn_running(bobs_session, alice, bob):
    turn = TurnWaitingForApproval(bobs_session, bob.id)
    call_id = turn.call_id()
    for abort in (turns.turn_abort, async_to_sync(turns.turn_abort_async)):
        with pytest.raises(SessionNotFound):
            abort(session_id=bobs_session, owner_id=alice.id)
    approvals.approval_decide(session_id=bobs_session, owner_id=bob.id, call_id=call_id, allow=True)
    assert turn.finish().status == "completed"


@pytest.mark.anyio
async def test_a_refused_action_tells_no_tab(bobs_session, alice, bob):
    layer = get_channel_layer()
    tab = await layer.new_channel()
    await layer.group_add(group_name(bobs_session), tab)
    for action in every_action(bobs_session, alice.id).values():
        with pytest.raises(SessionNotFound):
            await in_a_thread(action)
    # The owner's compaction is the first thing the tab hears: nothing came before it.
    entry = await in_a_thread(sessions.session_compact, session_id=bobs_session, owner_id=bob.id)
    message = await layer.receive(tab)
    assert message["event"]["type"] == "entry"
    assert message["event"]["entry"]["seq"] == entry.seq
    assert message["event"]["entry"]["kind"] == "compaction"


@pytest.fixture
def anyio_backend():
    return "asyncio"
