"""Memory fed by real turns (the offline model) and emptied by the real delete service."""

import pytest

from memory_app.models import (
    CompactionSummary,
    Episode,
    Procedure,
    ProfileFact,
    ThoughtLog,
    WorkingMemory,
)
from memory_app.services import memory_consolidate, working_memory_recall
from sessions_app.runtime.context.history import (
    project_anthropic,
    project_openai,
    validate_anthropic,
    validate_openai,
)
from sessions_app.runtime.turn.turns import turn_run
from sessions_app.services.compaction import compaction_append
from sessions_app.services.deletion import session_delete
from sessions_app.store import get_store
from tests.helpers import run_python

pytestmark = pytest.mark.django_db(transaction=True)


def session_memory(session_id) -> dict[str, int]:
    return {
        "episodes": Episode.objects.filter(session_id=session_id).count(),
        "thought_logs": ThoughtLog.objects.filter(session_id=session_id).count(),
        "working_memory": WorkingMemory.objects.filter(session_id=session_id).count(),
        "compaction_summaries": CompactionSummary.objects.filter(session_id=session_id).count(),
    }


def answer(result) -> str:
    return [e.content for e in result.entries if e.role == "assistant" and not e.tool_calls][-1]


def test_turns_leave_episodes_and_what_was_remembered_is_recalled_later(backend, alice):
    get_store().create("s-live", owner_id=alice.id)
    first = turn_run(session_id="s-live", text="Please remember that my locker code is 4711.")
    assert first.status == "completed"
    assert working_memory_recall(session_id="s-live") == {"locker code": "4711"}

    second = turn_run(session_id="s-live", text="What is my locker code?")
    assert "4711" in answer(second)

    episodes = list(Episode.objects.filter(session_id="s-live").order_by("first_seq"))
    assert [(e.turn_id, e.tools_used, e.task_kind, e.outcome) for e in episodes] == [
        (first.turn_id, ["remember"], "memory", "completed"),
        (second.turn_id, ["recall"], "memory", "completed"),
    ]
    assert episodes[0].owner_id == alice.id
    assert "4711" in episodes[1].answer
    assert list(episodes[1].thoughts.values_list("kind", "tool_name")) == [
        ("tool_call", "recall"),
        ("tool_result", "recall"),
    ]


def test_working_memory_is_recalled_by_a_turn_in_a_restarted_process(backend):
    get_store().create("s-restart")
    turn_run(session_id="s-restart", text="Remember that my door code is 2580.")
    child = run_python(
        "from sessions_app.runtime.turn.turns import turn_run\n"
        "result = turn_run(session_id='s-restart', text='What is my door code?')\n"
        "print([e.content for e in result.entries if e.role == 'assistant'][-1])\n",
        JARVIS_SESSION__PERSISTENCE_BACKEND=backend,
    )
    assert child.returncode == 0, child.stderr
    assert "2580" in child.stdout
    assert Episode.objects.filter(session_id="s-restart").count() == 2


def test_three_calculations_draft_a_procedure_and_a_fact_is_learned(alice):
    get_store().create("s-maths", owner_id=alice.id)
    turn_run(session_id="s-maths", text="Hi, my name is Alice and I live in Vienna.")
    for expression in ("2+3", "7*6", "10-4"):
        assert turn_run(session_id="s-maths", text=f"What is {expression}?").status == "completed"
    memory_consolidate(session_id="s-maths")

    facts = dict(ProfileFact.objects.filter(owner=alice).values_list("key", "text"))
    assert facts == {"name": "The user's name is Alice.", "home": "The user lives in Vienna."}
    procedure = Procedure.objects.get(owner=alice)
    assert (procedure.task_kind, procedure.status) == ("arithmetic", "draft")
    assert procedure.steps[0]["tool"] == "calculator"


def test_a_compacted_session_keeps_talking_with_the_summary(backend):
    get_store().create("s-long")
    for text in ("What is 6*7?", "Remember that my color is teal.", "What is 1+1?"):
        turn_run(session_id="s-long", text=text)
    before = get_store().get_messages("s-long")
    compaction = compaction_append(session_id="s-long")

    # The offline model validates the compacted projection for both providers before answering.
    result = turn_run(session_id="s-long", text="What is my color?")
    assert result.status == "completed"
    assert "teal" in answer(result)
    history = get_store().get_messages("s-long")
    assert history[: len(before)] == before  # nothing was rewritten
    context = project_openai(history, "system")
    validate_openai(context)
    validate_anthropic(project_anthropic(history, "system")[1])
    assert compaction.data["summary"] in context[1]["content"]
    assert "What is 6*7?" not in [m["content"] for m in context[2:]]


def test_deleting_a_session_takes_exactly_its_memory(backend, alice):
    store = get_store()
    for session_id in ("s-doomed", "s-kept"):
        store.create(session_id, owner_id=alice.id)
        turn_run(session_id=session_id, text="My name is Dana. Remember that my pin is 1234.")
        for expression in ("1+1", "2+2", "3+3"):
            turn_run(session_id=session_id, text=f"What is {expression}?")
        compaction_append(session_id=session_id)
        memory_consolidate(session_id=session_id)
    kept = session_memory("s-kept")
    facts = list(ProfileFact.objects.order_by("key").values_list("key", "text"))
    procedures = list(Procedure.objects.values_list("id", "status"))
    assert all(session_memory("s-doomed").values()) and facts and procedures

    assert session_delete(session_id="s-doomed", owner_id=alice.id) is True

    assert store.get_meta("s-doomed") is None
    assert session_memory("s-doomed") == dict.fromkeys(kept, 0)
    assert session_memory("s-kept") == kept
    assert list(ProfileFact.objects.order_by("key").values_list("key", "text")) == facts
    assert list(Procedure.objects.values_list("id", "status")) == procedures


def test_a_failing_purge_leaves_the_session_and_its_memory_in_place(backend, alice, monkeypatch):
    store = get_store()
    store.create("s-stays", owner_id=alice.id)
    turn_run(session_id="s-stays", text="Remember that my pin is 1234.")
    turn_run(session_id="s-stays", text="What is 2+2?")
    entries = store.get_messages("s-stays")
    memory = session_memory("s-stays")

    def broken(*, session_id):
        # Purge half-way, then fail: the delete must roll back even the part already done.
        WorkingMemory.objects.filter(session_id=session_id).delete()
        raise RuntimeError("memory store unavailable")

    monkeypatch.setattr("memory_app.receivers.memory_purge_for_session", broken)
    with pytest.raises(RuntimeError, match="memory store unavailable"):
        session_delete(session_id="s-stays", owner_id=alice.id)

    get_store.cache_clear()
    assert get_store().get_messages("s-stays") == entries
    assert session_memory("s-stays") == memory
    assert working_memory_recall(session_id="s-stays") == {"pin": "1234"}
