"""Where a compaction cuts, over any history (docs/design.md §22): never between a tool call
and its result, never inside a turn, and the summary requests it makes stay bounded."""

from hypothesis import given, settings
from hypothesis import strategies as st

from sessions_app.runtime.context.compaction import (
    ANSWER_CHARS,
    REQUEST_CHARS,
    SUMMARY_MAX_CHARS,
    SUMMARY_MAX_PIECES,
    compaction_plan,
    entry_chars,
    summarize,
    summary_request_chars,
)
from sessions_app.runtime.context.history import (
    project_anthropic,
    project_openai,
    validate_anthropic,
    validate_openai,
)
from sessions_app.store import NewEntry
from tests.builders import assistant, call, records, result, turn_end, turn_start, user

words = st.text(alphabet="abc xyz 12+\n", min_size=0, max_size=40)


@st.composite
def histories(draw):
    """Whole turns with tool steps (parallel calls, each answered), steers between steps,
    and earlier compactions — some made where this code cuts, some (older data) anywhere."""
    history = []
    next_id = 0

    def add(entries):
        start = history[-1].seq + 1 if history else 1
        history.extend(records(entries, start=start))

    for turn_index in range(draw(st.integers(0, 6))):
        turn = f"t{turn_index}"
        add([turn_start(turn), user(draw(words) or "hi", turn)])
        for _ in range(draw(st.integers(0, 3))):
            calls = []
            for _ in range(draw(st.integers(1, 3))):
                next_id += 1
                calls.append(call(f"c{next_id}"))
            add([assistant(draw(words), calls, turn)])
            add([result(c["id"], draw(words), turn=turn) for c in calls])
            if draw(st.integers(0, 3)) == 0:
                steer = NewEntry(
                    role="user", content=draw(words) or "wait", turn_id=turn, data={"steer": True}
                )
                add([steer])
        add([assistant(draw(words) or "done", turn=turn), turn_end(turn)])
        if history and draw(st.integers(0, 4)) == 0:
            plan = compaction_plan(history, keep_tokens=draw(st.integers(0, 60)), count=entry_chars)
            kept = plan.first_kept_seq if plan else draw(st.integers(1, history[-1].seq))
            if plan is None or draw(st.booleans()):
                kept = draw(st.integers(1, history[-1].seq))  # older data: a cut anywhere
            add([NewEntry(kind="compaction", data={"summary": "earlier", "first_kept_seq": kept})])
    return history


def both_accept(history):
    validate_openai(project_openai(history, "system"))
    validate_anthropic(project_anthropic(history, "system")[1])


@settings(max_examples=300, deadline=None)
@given(histories(), st.integers(0, 200))
def test_a_compaction_never_splits_a_tool_call_from_its_result(history, keep_tokens):
    plan = compaction_plan(history, keep_tokens=keep_tokens, count=entry_chars)
    if plan is None:
        return
    by_seq = {entry.seq: entry for entry in history}
    first = by_seq[plan.first_kept_seq]
    # The cut is where a turn starts, never at a steer inside one.
    assert first.kind == "turn_start" or (first.role == "user" and not (first.data or {}))
    kept_calls = {c["id"] for e in plan.kept if e.role == "assistant" for c in e.tool_calls or ()}
    kept_results = {e.tool_call_id for e in plan.kept if e.role == "tool"}
    assert kept_results <= kept_calls  # no result without its call
    answered = {e.tool_call_id for e in history if e.role == "tool"}
    assert kept_calls & answered <= kept_results  # no call without its result
    assert [e.seq for e in plan.summarized + plan.kept] == sorted(
        e.seq for e in plan.summarized + plan.kept
    )
    assert plan.summarized and any(e.kind == "message" for e in plan.summarized)
    # What the model sees next is valid for both providers.
    compaction = NewEntry(
        kind="compaction", data={"summary": "s", "first_kept_seq": plan.first_kept_seq}
    )
    both_accept(history + records([compaction, user("next", "t-next")], start=history[-1].seq + 1))


@settings(max_examples=200, deadline=None)
@given(histories(), st.integers(20, 2000), st.text(max_size=20_000))
def test_every_summary_request_is_bounded(history, piece_chars, previous):
    plan = compaction_plan(history, keep_tokens=0, count=entry_chars)
    if plan is None:
        return
    plan = type(plan)(
        previous_summary=previous or None,
        summarized=plan.summarized,
        kept=plan.kept,
        first_kept_seq=plan.first_kept_seq,
    )
    asked = []

    def ask(question: str) -> str:
        asked.append(question)
        return question  # the most long-winded model: it repeats everything it was sent

    summary = summarize(plan, ask=ask, piece_chars=piece_chars)

    assert len(asked) <= SUMMARY_MAX_PIECES
    assert all(len(question) <= summary_request_chars(piece_chars) for question in asked)
    # The summary that stands in for the older turns is bounded as well.
    assert len(summary) <= SUMMARY_MAX_CHARS + REQUEST_CHARS + ANSWER_CHARS + 40
