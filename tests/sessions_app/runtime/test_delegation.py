"""The `delegate` tool on both backends: the three session policies, abort, delete, ids."""

import asyncio
import json
import threading
from dataclasses import replace

import pytest
from django.db import connections

from memory_app.models import Episode, WorkingMemory
from sessions_app import selectors
from sessions_app.core.ids import validate_session_id
from sessions_app.runtime.tools.base import ToolContext
from sessions_app.runtime.tools.registry import TOOLS
from sessions_app.runtime.turn import agents
from sessions_app.runtime.turn.turns import turn_abort, turn_run
from sessions_app.selectors.turns import request_header_of
from sessions_app.services import deletion, sessions
from sessions_app.store import get_store
from tests.helpers import run_in_threads

from .conftest import assert_history_valid

pytestmark = pytest.mark.django_db(transaction=True)


def conversation(user, session_id="chat-1"):
    meta, _ = sessions.session_create(owner_id=user.id, session_id=session_id)
    return meta.id


def answer(result) -> str:
    return [e.content for e in result.entries if e.role == "assistant" and not e.tool_calls][-1]


def delegate_call(result) -> dict:
    (call,) = [c for e in result.entries for c in e.tool_calls or () if c["name"] == "delegate"]
    return call


def tool_result(result, name="delegate"):
    return next(e for e in result.entries if e.role == "tool" and e.name == name)


def test_ask_researcher_runs_a_turn_in_its_own_session_and_answers_in_the_parent(backend, alice):
    parent = conversation(alice)
    result = turn_run(session_id=parent, text="ask researcher to compute 6*7")

    assert result.status == "completed"
    call = delegate_call(result)
    assert json.loads(call["arguments"]) == {"agent": "researcher", "task": "compute 6*7"}
    assert tool_result(result).content == "6*7 = 42."
    assert not tool_result(result).is_error
    assert answer(result) == "researcher says: 6*7 = 42."

    sub_id = f"agent_researcher__{parent}"
    meta = get_store().get_meta(sub_id)
    assert (meta.agent, meta.owner_id, meta.spawned_by) == ("researcher", alice.id, parent)
    sub_history = get_store().get_messages(sub_id)
    assert [e.content for e in sub_history if e.role == "user"] == ["compute 6*7"]
    assert [c["name"] for e in sub_history for c in e.tool_calls or ()] == ["calculator"]
    start = next(e for e in sub_history if e.kind == "turn_start")
    assert start.data["agent"] == "researcher"
    header = request_header_of(start)
    assert header["system"] == agents.agent_get("researcher").system_prompt
    assert "delegate" not in [tool["name"] for tool in header["tools"]]
    assert_history_valid(sub_id)
    assert_history_valid(parent)

    # A second request of the same conversation goes to the same researcher session.
    turn_run(session_id=parent, text="ask researcher to compute 2+3")
    turns = [e for e in get_store().get_messages(sub_id) if e.kind == "turn_end"]
    assert [e.data["status"] for e in turns] == ["completed", "completed"]

    listed = [row["id"] for row in selectors.session_list(owner_id=alice.id)]
    assert listed == [parent], "sub-agent sessions are hidden by default"
    everything = selectors.session_list(owner_id=alice.id, include_subagents=True)
    assert {row["id"]: row["spawned_by"] for row in everything} == {parent: None, sub_id: parent}


def test_scratch_leaves_no_session_and_no_memory_behind(backend, alice):
    parent = conversation(alice)
    result = turn_run(session_id=parent, text="ask scratch to remember that my code is 1234")

    assert tool_result(result).content == "Noted: your code is 1234."
    assert answer(result) == "scratch says: Noted: your code is 1234."
    assert_history_valid(parent)
    leftovers = get_store().list(include_subagents=True)
    assert [meta.id for meta in leftovers] == [parent]
    assert not WorkingMemory.objects.exclude(session_id=parent).exists()
    assert not Episode.objects.exclude(session_id=parent).exists()


def test_librarian_keeps_one_session_per_user_across_conversations(backend, alice, bob):
    first = conversation(alice, "chat-1")
    second = conversation(alice, "chat-2")
    turn_run(session_id=first, text="ask librarian to remember that my color is blue")
    result = turn_run(session_id=second, text="ask librarian to tell me what is my color")

    assert answer(result) == "librarian says: Your color is blue."
    librarian = f"agent_librarian:{alice.id}"
    meta = get_store().get_meta(librarian)
    assert (meta.agent, meta.owner_id, meta.spawned_by) == ("librarian", alice.id, first)
    users = [e.content for e in get_store().get_messages(librarian) if e.role == "user"]
    assert users == ["remember that my color is blue", "tell me what is my color"]
    assert_history_valid(librarian)

    # Bob's librarian is another session: nothing of Alice's reaches him.
    bobs = conversation(bob, "bobs-chat")
    result = turn_run(session_id=bobs, text="ask librarian to tell me what is my color")
    assert answer(result) == "librarian says: I don't know your color yet."
    assert get_store().get_meta(f"agent_librarian:{bob.id}").owner_id == bob.id

    # Deleting the conversation that first asked keeps the librarian.
    assert deletion.session_delete(session_id=first, owner_id=alice.id)
    assert get_store().get_meta(librarian) is not None


def run_until_aborted(monkeypatch, parent, agent):
    """Delegate a long wait to `agent`, abort the parent once the sub-agent's wait runs."""
    waiting = threading.Event()
    original = TOOLS["wait"]

    async def wait_and_tell(context, arguments):
        if context.session_id.startswith(f"agent_{agent}__"):
            waiting.set()
        return await original.arun(context, arguments)

    monkeypatch.setitem(TOOLS, "wait", replace(original, arun=wait_and_tell))
    outcome = {}
    thread = threading.Thread(
        target=lambda: outcome.setdefault(
            "result", turn_run(session_id=parent, text=f"ask {agent} to wait 120 seconds")
        )
    )
    thread.start()
    assert waiting.wait(30), "the sub-agent's wait tool started"
    assert turn_abort(session_id=parent) is True
    thread.join(30)
    assert not thread.is_alive()
    result = outcome["result"]
    assert result.status == "aborted"
    delegated = tool_result(result)
    assert delegated.is_error and delegated.content.startswith("aborted")
    assert_history_valid(parent)
    return result


def test_aborting_the_parent_aborts_the_sub_agents_turn(backend, alice, monkeypatch):
    parent = conversation(alice)
    run_until_aborted(monkeypatch, parent, "researcher")

    sub_id = f"agent_researcher__{parent}"
    sub_history = get_store().get_messages(sub_id)
    assert sub_history[-1].kind == "turn_end" and sub_history[-1].data["status"] == "aborted"
    wait_result = next(e for e in sub_history if e.role == "tool")
    assert wait_result.is_error and wait_result.content.startswith("aborted")
    assert_history_valid(sub_id)


def test_an_aborted_scratch_task_leaves_no_session_behind(backend, alice, monkeypatch):
    parent = conversation(alice)
    run_until_aborted(monkeypatch, parent, "scratch")

    assert [meta.id for meta in get_store().list(include_subagents=True)] == [parent]
    assert not Episode.objects.exclude(session_id=parent).exists()


def test_deleting_a_conversation_deletes_its_researcher_with_its_memory(backend, alice):
    parent = conversation(alice)
    turn_run(session_id=parent, text="ask researcher to remember that my code is 1234")
    sub_id = f"agent_researcher__{parent}"
    assert WorkingMemory.objects.filter(session_id=sub_id).exists()
    branch = sessions.session_branch(session_id=parent, owner_id=alice.id)

    assert deletion.session_delete(session_id=parent, owner_id=alice.id) is True

    assert get_store().get_meta(sub_id) is None
    assert not WorkingMemory.objects.filter(session_id=sub_id).exists()
    assert not Episode.objects.filter(session_id=sub_id).exists()
    assert get_store().get_meta(branch.id).parent_id is None, "a branch outlives its parent"


def test_deleting_the_parent_while_its_researcher_works_stops_and_removes_both(
    backend, alice, monkeypatch
):
    waiting = threading.Event()
    original = TOOLS["wait"]

    async def wait_and_tell(context, arguments):
        waiting.set()
        return await original.arun(context, arguments)

    monkeypatch.setitem(TOOLS, "wait", replace(original, arun=wait_and_tell))
    parent = conversation(alice)
    outcome = {}

    def run():
        try:
            outcome["result"] = turn_run(
                session_id=parent, text="ask researcher to remember that my pin is 7 and wait 120 s"
            )
        except Exception as error:  # noqa: BLE001 - the test inspects it
            outcome["error"] = error
        finally:
            connections.close_all()

    thread = threading.Thread(target=run)
    thread.start()
    assert waiting.wait(30), "the researcher's wait tool started"

    assert deletion.session_delete(session_id=parent, owner_id=alice.id) is True
    thread.join(30)
    assert not thread.is_alive()

    sub_id = f"agent_researcher__{parent}"
    assert get_store().get_meta(parent) is None
    assert get_store().get_meta(sub_id) is None
    assert not WorkingMemory.objects.filter(session_id=sub_id).exists()
    assert not Episode.objects.exists()


def test_parent_ids_at_the_length_limit_give_valid_distinct_sub_agent_ids(backend, alice):
    researcher = agents.agent_get("researcher")
    near = ["p" * 190 + "-first-one", "p" * 190 + "-other-one"]
    ids = [
        agents.subagent_session_id(researcher, parent_id=parent, owner_id=alice.id)
        for parent in near
    ]
    assert all(len(sub_id) == 200 and validate_session_id(sub_id) for sub_id in ids)
    assert ids[0] != ids[1]
    assert ids[0] == agents.subagent_session_id(researcher, parent_id=near[0], owner_id=None)
    short = agents.subagent_session_id(researcher, parent_id="p" * 181, owner_id=None)
    assert short == "agent_researcher__" + "p" * 181  # exactly 200: kept as it is

    parent = conversation(alice, near[0])
    result = turn_run(session_id=parent, text="ask researcher to compute 6*7")
    assert answer(result) == "researcher says: 6*7 = 42."
    assert get_store().get_meta(ids[0]).spawned_by == parent
    assert deletion.session_delete(session_id=parent, owner_id=alice.id)
    assert get_store().get_meta(ids[0]) is None


def test_a_sub_agent_id_squatted_by_another_user_never_breaks_delegation(backend, alice, bob):
    parent = conversation(alice)
    squatted = f"agent_researcher__{parent}"
    # A row made before users were refused `agent_` ids (the service refuses it now).
    get_store().create(squatted, agent="researcher", owner_id=bob.id)

    result = turn_run(session_id=parent, text="ask researcher to compute 6*7")
    assert answer(result) == "researcher says: 6*7 = 42."
    fallback = agents.subagent_fallback_session_id(squatted, owner_id=alice.id)
    assert fallback.startswith(squatted + ".")
    meta = get_store().get_meta(fallback)
    assert (meta.agent, meta.owner_id, meta.spawned_by) == ("researcher", alice.id, parent)
    # The conversation keeps finding its researcher there.
    turn_run(session_id=parent, text="ask researcher to compute 2+3")
    users = [e.content for e in get_store().get_messages(fallback) if e.role == "user"]
    assert users == ["compute 6*7", "compute 2+3"]
    assert get_store().get_messages(squatted) == [], "bob's session was not touched"
    assert_history_valid(parent)

    assert deletion.session_delete(session_id=parent, owner_id=alice.id)
    assert get_store().get_meta(fallback) is None, "deleted with its conversation"
    assert get_store().get_meta(squatted).owner_id == bob.id


def test_a_per_agent_id_held_by_another_agent_never_breaks_delegation(backend, alice):
    first, second = conversation(alice, "chat-1"), conversation(alice, "chat-2")
    held = f"agent_librarian:{alice.id}"
    get_store().create(held, agent="jarvis", owner_id=alice.id)

    turn_run(session_id=first, text="ask librarian to remember that my color is blue")
    result = turn_run(session_id=second, text="ask librarian to tell me what is my color")
    assert answer(result) == "librarian says: Your color is blue."
    fallback = agents.subagent_fallback_session_id(held, owner_id=alice.id)
    assert get_store().get_meta(fallback).agent == "librarian"
    assert agents.is_per_agent_session(fallback, "librarian"), "cleanup keeps it"
    assert get_store().get_meta(held).agent == "jarvis"


def test_only_defined_sub_agents_are_delegated_to(backend, alice):
    parent = conversation(alice)
    result = turn_run(session_id=parent, text="ask jarvis to compute 6*7")
    assert "delegate" not in [c["name"] for e in result.entries for c in e.tool_calls or ()]
    delegate = TOOLS["delegate"].arun
    with pytest.raises(ValueError, match="no sub-agent named 'jarvis'"):
        asyncio.run(
            delegate(ToolContext(session_id=parent), {"agent": "jarvis", "task": "anything"})
        )
    with pytest.raises(ValueError, match="a task is"):
        asyncio.run(delegate(ToolContext(session_id=parent), {"agent": "researcher", "task": "  "}))
    assert [meta.id for meta in get_store().list(include_subagents=True)] == [parent]


def test_two_conversations_asking_the_librarian_at_once_take_turns(backend, alice):
    parents = [conversation(alice, f"chat-{n}") for n in range(2)]

    def ask(index):
        return turn_run(
            session_id=parents[index],
            text=f"ask librarian to remember that my slot{index} is {index}",
        )

    results = run_in_threads(ask, 2)

    for index, result in enumerate(results):
        assert answer(result) == f"librarian says: Noted: your slot{index} is {index}."
    librarian = f"agent_librarian:{alice.id}"
    ends = [e for e in get_store().get_messages(librarian) if e.kind == "turn_end"]
    assert [e.data["status"] for e in ends] == ["completed", "completed"]
    assert_history_valid(librarian)
    assert [m.id for m in get_store().list(include_subagents=True) if m.agent == "librarian"] == [
        librarian
    ]
