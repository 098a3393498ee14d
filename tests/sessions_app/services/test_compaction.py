"""`/compact`: the model sees a summary instead of older turns; the history stays whole."""

import pytest

from memory_app.models import CompactionSummary
from sessions_app.runtime.context.history import (
    SUMMARY_PREFIX,
    project_anthropic,
    project_openai,
    validate_anthropic,
    validate_openai,
)
from sessions_app.services.compaction import compaction_append, estimate_tokens
from sessions_app.store import SessionNotFound, get_store
from tests.builders import arithmetic_turn, play_turn

pytestmark = pytest.mark.django_db

SYSTEM = "You are Jarvis."


def three_turns(session_id):
    play_turn(session_id, "My name is Mia and I live in Turin.", "Nice to meet you, Mia!")
    arithmetic_turn(session_id, "12*12", "144")
    return play_turn(
        session_id,
        "And what is 144 + 1?",
        "It is 145.",
        thought="Let me add one.",
        tools=[("calculator", {"expression": "144+1"}, "145")],
    )


def test_compaction_changes_what_the_model_sees_but_not_the_history(backend):
    last_turn = three_turns("s-compact")
    store = get_store()
    history_before = store.get_messages("s-compact")
    context_before = project_openai(history_before, SYSTEM)

    record = compaction_append(session_id="s-compact")

    assert record.kind == "compaction"
    assert record.seq == history_before[-1].seq + 1
    # The kept tail starts where the last turn starts, so its tool call keeps its result.
    assert record.data["first_kept_seq"] == last_turn[0].seq
    assert record.data["tokens_before"] > 0
    summary = record.data["summary"]
    assert "My name is Mia and I live in Turin." in summary
    assert "Nice to meet you, Mia!" in summary
    assert "What is 12*12?" in summary and "calculator" in summary and "144" in summary
    assert "145" not in summary

    # The history is whole: every entry still there, in order, plus the compaction entry.
    history_after = store.get_messages("s-compact")
    assert history_after[:-1] == history_before
    assert history_after[-1] == record

    # The model's context: system, the summary, then only the last turn.
    context_after = project_openai(history_after, SYSTEM)
    validate_openai(context_after)
    assert context_after[0] == context_before[0]
    assert context_after[1]["role"] == "user"
    assert context_after[1]["content"].startswith(SUMMARY_PREFIX)
    assert summary in context_after[1]["content"]
    assert [m["role"] for m in context_after[2:]] == ["user", "assistant", "tool", "assistant"]
    assert context_after[2]["content"] == "And what is 144 + 1?"
    assert len(context_after) < len(context_before)

    system, messages = project_anthropic(history_after, SYSTEM)
    validate_anthropic(messages)
    assert system == SYSTEM
    # Anthropic merges the summary and the next request into one user message.
    first_texts = [block["text"] for block in messages[0]["content"]]
    assert first_texts == [SUMMARY_PREFIX + summary, "And what is 144 + 1?"]
    assert "Turin" not in str(messages[1:])

    stored = CompactionSummary.objects.get(session_id="s-compact")
    assert (stored.entry_seq, stored.summary, stored.first_kept_seq) == (
        record.seq,
        summary,
        record.data["first_kept_seq"],
    )


def test_a_second_compaction_carries_the_first_summary_forward(backend):
    three_turns("s-twice")
    first = compaction_append(session_id="s-twice")
    with pytest.raises(ValueError, match="nothing to compact"):
        compaction_append(session_id="s-twice")

    play_turn("s-twice", "Tell me about chess.", "Chess is a board game. " * 60)
    play_turn("s-twice", "I also like chess.", "Chess is great.")
    whole_history_tokens = estimate_tokens(get_store().get_messages("s-twice"))
    second = compaction_append(session_id="s-twice")
    assert second.data["first_kept_seq"] > first.data["first_kept_seq"]
    assert second.data["summary"].startswith(first.data["summary"])
    assert "145" in second.data["summary"]
    assert "Tell me about chess." in second.data["summary"]
    # Long answers are trimmed in the summary: the model's context shrank, the history not.
    compacted = project_openai(get_store().get_messages("s-twice"), SYSTEM)
    context_tokens = sum(len(m["content"] or "") for m in compacted) / 4
    assert context_tokens < whole_history_tokens / 2

    history = get_store().get_messages("s-twice")
    context = project_openai(history, SYSTEM)
    validate_openai(context)
    validate_anthropic(project_anthropic(history, SYSTEM)[1])
    assert [m["content"] for m in context if m["role"] == "user"][1:] == ["I also like chess."]
    assert CompactionSummary.objects.filter(session_id="s-twice").count() == 2


def test_too_little_history_is_nothing_to_compact(backend):
    play_turn("s-short", "Hi", "Hello!")
    with pytest.raises(ValueError, match="nothing to compact"):
        compaction_append(session_id="s-short")
    assert [e.kind for e in get_store().get_messages("s-short")] == [
        "turn_start",
        "message",
        "message",
        "turn_end",
    ]
    with pytest.raises(SessionNotFound):
        compaction_append(session_id="s-missing")


def test_a_compaction_whose_summary_memory_cannot_keep_is_not_stored(settings, monkeypatch):
    settings.JARVIS_SESSION__PERSISTENCE_BACKEND = "db"
    get_store.cache_clear()
    three_turns("s-atomic")
    history_before = get_store().get_messages("s-atomic")

    def broken(**kwargs):
        raise RuntimeError("the memory database is gone")

    monkeypatch.setattr("memory_app.receivers.compaction_summary_record", broken)
    with pytest.raises(RuntimeError, match="memory database is gone"):
        compaction_append(session_id="s-atomic")

    # The entry and the summary commit together or not at all (db backend).
    assert get_store().get_messages("s-atomic") == history_before
    assert not CompactionSummary.objects.filter(session_id="s-atomic").exists()
