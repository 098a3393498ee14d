"""Every write of memory_app (docs/design.md §9).

Receivers, the agent's working-memory tools, tasks, admin actions and management commands
call these; nothing else writes memory rows. Queuing consolidation is in memory_app.tasks,
beside the task it queues: the task's body calls this module, so a service here that queued
it would make a circle (docs/design.md §16).
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Sequence
from datetime import datetime, timedelta

from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.db.models import Case, Count, Max, Q, When
from django.utils import timezone

from jarvis_site.shared.errors import Code, DomainError
from memory_app.extraction import FactCandidate, classify_task, extract_facts, procedure_steps
from memory_app.llm import model_extract_facts
from memory_app.models import (
    CompactionSummary,
    Episode,
    MemoryPreference,
    Procedure,
    ProfileFact,
    ThoughtLog,
    WorkingMemory,
)
from sessions_app.core.ids import is_test_session
from sessions_app.selectors import EntryRecord, session_find
from sessions_app.services.extensions import CONSOLIDATION, model_calls_counted, usage_ledger_add

logger = logging.getLogger(__name__)

KEY_MAX_LENGTH = 200
TOOL_RESULT_SUMMARY_CHARS = 500
TOOL_ARGUMENTS_CHARS = 2000
PROCEDURE_SUCCESSES = 3
COMPLETED = "completed"


# --- episodes ----------------------------------------------------------------------------
def _final_answer(entries: Sequence[EntryRecord]) -> EntryRecord | None:
    assistants = [e for e in entries if e.kind == "message" and e.role == "assistant"]
    for entry in reversed(assistants):
        if not entry.tool_calls and entry.content.strip():
            return entry
    return None


def episode_record_for_turn(
    *,
    session_id: str,
    owner_id: int | None,
    turn_id: str,
    status: str,
    entries: Sequence[EntryRecord],
) -> Episode:
    """Write the episode of a finished turn and its thought log; idempotent per turn.

    Steps: take the user's request (first user message), the final answer (last assistant text without tool
    calls), the tool names in call order and the task kind; store the episode, then one
    thought-log row per intermediate step (assistant text before tool calls, each call,
    each result trimmed to a summary); if this turn was recorded already, return that
    episode. Runs inside the caller's transaction (the runtime's turn_end append), so a
    turn and its episode are stored together or not at all.

    A turn is recorded once in nearly every case: the duplicate is found by the unique
    constraint, not looked for first (one query less in every turn's closing).
    """
    entries = sorted(entries, key=lambda entry: entry.seq)
    request = next(
        (e.content for e in entries if e.kind == "message" and e.role == "user"),
        "",
    )
    answer = _final_answer(entries)
    tools_used = [
        call["name"]
        for e in entries
        if e.kind == "message" and e.role == "assistant"
        for call in e.tool_calls or ()
    ]
    seqs = [e.seq for e in entries]
    episode = Episode(
        session_id=session_id,
        owner_id=owner_id,
        turn_id=turn_id,
        first_seq=min(seqs, default=0),
        last_seq=max(seqs, default=0),
        request=request,
        answer=answer.content if answer else "",
        tools_used=tools_used,
        outcome=status,
        task_kind=classify_task(request, tools_used),
    )
    if not _insert_unless_recorded(episode):
        return Episode.objects.get(session_id=session_id, turn_id=turn_id)
    thoughts = _thoughts(episode, entries, answer_seq=answer.seq if answer else None)
    if thoughts:  # a plain answer has none: no query to build for nothing
        ThoughtLog.objects.bulk_create(thoughts)
    return episode


def _insert_unless_recorded(episode: Episode) -> bool:
    """INSERT … ON CONFLICT DO NOTHING on the episode's (session, turn): False when the turn
    was recorded already (a concurrent duplicate). The caller's transaction stays usable
    without a savepoint, which is two more round trips in every turn's closing."""
    fields = [field for field in Episode._meta.concrete_fields if not field.primary_key]
    quote = connection.ops.quote_name
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {quote(Episode._meta.db_table)} "
            f"({', '.join(quote(field.column) for field in fields)}) "
            f"VALUES ({', '.join(['%s'] * len(fields))}) "
            "ON CONFLICT (session_id, turn_id) DO NOTHING RETURNING id",
            [field.get_db_prep_save(field.pre_save(episode, True), connection) for field in fields],
        )
        row = cursor.fetchone()
    if row is None:
        return False
    episode.pk = row[0]
    episode._state.adding = False
    episode._state.db = connection.alias
    return True


def _thoughts(episode: Episode, entries: Sequence[EntryRecord], answer_seq: int | None):
    rows: list[ThoughtLog] = []

    def add(entry: EntryRecord, kind: str, text: str, tool_name: str = "", is_error=False):
        rows.append(
            ThoughtLog(
                episode=episode,
                session_id=episode.session_id,
                turn_id=episode.turn_id,
                position=len(rows),
                seq=entry.seq,
                kind=kind,
                tool_name=tool_name,
                text=text,
                is_error=is_error,
            )
        )

    for entry in entries:
        if entry.kind != "message":
            continue
        if entry.role == "assistant" and entry.seq != answer_seq:
            if entry.content.strip():
                add(entry, ThoughtLog.Kind.THOUGHT, entry.content)
            for call in entry.tool_calls or ():
                add(
                    entry,
                    ThoughtLog.Kind.TOOL_CALL,
                    call["arguments"][:TOOL_ARGUMENTS_CHARS],
                    tool_name=call["name"],
                )
        elif entry.role == "tool":
            summary = entry.content
            if len(summary) > TOOL_RESULT_SUMMARY_CHARS:
                summary = summary[: TOOL_RESULT_SUMMARY_CHARS - 1] + "…"
            add(
                entry,
                ThoughtLog.Kind.TOOL_RESULT,
                summary,
                tool_name=entry.name,
                is_error=entry.is_error,
            )
    return rows


# --- working memory ----------------------------------------------------------------------
def _working_memory_key(key: str) -> str:
    if not isinstance(key, str) or not key.strip():
        raise ValueError("a working-memory key cannot be empty")
    key = key.strip()
    if len(key) > KEY_MAX_LENGTH:
        raise ValueError(f"a working-memory key is at most {KEY_MAX_LENGTH} characters")
    return key


def working_memory_remember(
    *, session_id: str, key: str, value: str, owner_id: int | None = None
) -> None:
    """Store `value` under `key` for this session; a key remembered again is overwritten.
    `owner_id` is the session's owner (the tool knows it; looked up when not given)."""
    key = _working_memory_key(key)
    if owner_id is None:
        meta = session_find(session_id=session_id)
        owner_id = meta.owner_id if meta is not None else None
    now = timezone.now()
    WorkingMemory.objects.update_or_create(
        session_id=session_id,
        key=key,
        defaults={"value": str(value), "updated_at": now, "owner_id": owner_id},
        create_defaults={
            "value": str(value),
            "owner_id": owner_id,
            "created_at": now,
            "updated_at": now,
        },
    )


def working_memory_recall(*, session_id: str, key: str | None = None) -> dict[str, str]:
    """Everything remembered in this session, or only `key` (empty when it was never stored)."""
    rows = WorkingMemory.objects.filter(session_id=session_id)
    if key is not None:
        rows = rows.filter(key=_working_memory_key(key))
    return dict(rows.order_by("key").values_list("key", "value"))


def working_memory_forget(*, session_id: str, key: str) -> bool:
    """Delete one key of this session's working memory; False when nothing was stored under it."""
    key = _working_memory_key(key)
    return bool(WorkingMemory.objects.filter(session_id=session_id, key=key).delete()[0])


def _of_owner(owner_id: int | None):
    rows = WorkingMemory.objects.all()
    return rows if owner_id is None else rows.filter(owner_id=owner_id)


def working_memory_orphans(
    *, owner_id: int | None, live_session_ids: Collection[str]
) -> dict[str, int]:
    """Working memory that belongs to no live session: {session id: keys} of `owner_id`'s rows
    (None: every owner's, for the operator) whose session is not in `live_session_ids`."""
    rows = (
        _of_owner(owner_id)
        .values("session_id")
        .annotate(keys=Count("id"))
        .values_list("session_id", "keys")
    )
    # Compared here, not in SQL: the live sessions can be more than a query may list.
    return {session_id: keys for session_id, keys in rows if session_id not in live_session_ids}


def working_memory_clear_orphan(
    *, session_id: str, owner_id: int | None, written_before: datetime
) -> int:
    """Forget `owner_id`'s working memory (None: anyone's) of a session found gone at
    `written_before`; how many keys went. A row written since then is left: its session
    is there again (the id was taken anew) and it is live working memory."""
    rows = _of_owner(owner_id).filter(session_id=session_id, updated_at__lt=written_before)
    return rows.delete()[0]


# --- the delete cascade ------------------------------------------------------------------
def memory_purge_for_session(*, session_id: str) -> dict[str, int]:
    """Delete the memory bound to one session — and nothing else.

    Episodes, thought logs, working memory and compaction summaries go; profile facts and
    procedures belong to the user and stay. Runs in the delete service's transaction (the
    `session_deleted` receiver calls it directly, not on commit), so if this fails the
    session is not deleted either.
    """
    with transaction.atomic():
        counts = {
            "thought_logs": ThoughtLog.objects.filter(session_id=session_id).delete()[0],
            "episodes": Episode.objects.filter(session_id=session_id).delete()[0],
            "working_memory": WorkingMemory.objects.filter(session_id=session_id).delete()[0],
            "compaction_summaries": CompactionSummary.objects.filter(
                session_id=session_id
            ).delete()[0],
        }
    return counts


def memory_purge_for_owner(*, owner_id: int) -> dict[str, int]:
    """Delete every memory row of a user whose account is being deleted: profile facts,
    procedures, and episodes (with their thought logs) a session delete left behind.

    Session-bound rows go with each session (`memory_purge_for_session`); this takes what
    belongs to the user alone. Rerunning it deletes only what is left.
    """
    with transaction.atomic():
        episodes = Episode.objects.filter(owner_id=owner_id)
        return {
            "thought_logs": ThoughtLog.objects.filter(episode__in=episodes).delete()[0],
            "episodes": episodes.delete()[0],
            "profile_facts": ProfileFact.objects.filter(owner_id=owner_id).delete()[0],
            "procedures": Procedure.objects.filter(owner_id=owner_id).delete()[0],
        }


def memory_export_for_owner(*, owner_id: int) -> dict[str, list[dict]]:
    """What memory keeps about a user, for their download: profile facts and procedures."""
    facts = ProfileFact.objects.filter(owner_id=owner_id).order_by("key")
    procedures = Procedure.objects.filter(owner_id=owner_id).order_by("task_kind", "created_at")
    return {
        "profile_facts": [
            {
                "key": fact.key,
                "text": fact.text,
                "confidence": fact.confidence,
                "source_session_id": fact.source_session_id or None,
                "created_at": fact.created_at.isoformat(),
                "updated_at": fact.updated_at.isoformat(),
            }
            for fact in facts
        ],
        "procedures": [
            {
                "task_kind": procedure.task_kind,
                "title": procedure.title,
                "steps": procedure.steps,
                "status": procedure.status,
                "created_at": procedure.created_at.isoformat(),
            }
            for procedure in procedures
        ],
    }


# --- compaction --------------------------------------------------------------------------
def compaction_summary_record(
    *,
    session_id: str,
    entry_seq: int,
    summary: str,
    first_kept_seq: int,
    tokens_before: int,
) -> CompactionSummary:
    """Keep the summary of a compaction entry as the session's long-term memory."""
    summary_row, _ = CompactionSummary.objects.update_or_create(
        session_id=session_id,
        entry_seq=entry_seq,
        defaults={
            "summary": summary,
            "first_kept_seq": first_kept_seq,
            "tokens_before": tokens_before,
        },
    )
    return summary_row


# --- procedures --------------------------------------------------------------------------
# What a person may decide about a procedure (a draft is only ever made by consolidation).
PROCEDURE_DECISIONS = (Procedure.Status.APPROVED, Procedure.Status.REJECTED)
# What the person's list shows: what waits for them, and what they said yes to.
PROCEDURES_LISTED = (Procedure.Status.DRAFT, Procedure.Status.APPROVED)


class ProcedureNotFound(DomainError):
    """No such procedure of this person (404, for another person's too)."""

    code = Code.NOT_FOUND


class ProcedureDecisionInvalid(DomainError):
    """A status a person cannot set (400 invalid)."""

    code = Code.INVALID


def _procedure_decide(procedure_id: int, status: str, owner_id: int | None = None) -> Procedure:
    with transaction.atomic():
        procedures = Procedure.objects.select_for_update().filter(pk=procedure_id)
        if owner_id is not None:
            procedures = procedures.filter(owner_id=owner_id)
        procedure = procedures.first()
        if procedure is None:
            raise ProcedureNotFound("no such procedure of yours")
        if procedure.status != status:
            procedure.status = status
            procedure.decided_at = timezone.now()
            procedure.save(update_fields=["status", "decided_at"])
    return procedure


def procedure_decide(*, procedure_id: int, owner_id: int, status: str) -> Procedure:
    """The person approves their procedure (from their next turn on, it reaches the model's
    system prompt, docs/design.md §22) or rejects it (it never does, and consolidation
    drafts no other for that kind of task). Deciding what it already is changes nothing.
    Raises ProcedureDecisionInvalid for another status, ProcedureNotFound for a missing
    procedure or another person's."""
    if status not in PROCEDURE_DECISIONS:
        raise ProcedureDecisionInvalid(f'status is "approved" or "rejected", not {status!r}')
    return _procedure_decide(procedure_id, status, owner_id=owner_id)


def procedure_get(*, procedure_id: int, owner_id: int) -> Procedure:
    """The person's procedure; ProcedureNotFound for a missing one or another person's."""
    procedure = Procedure.objects.filter(pk=procedure_id, owner_id=owner_id).first()
    if procedure is None:
        raise ProcedureNotFound("no such procedure of yours")
    return procedure


def procedures_of_owner(*, owner_id: int) -> list[Procedure]:
    """The person's procedures to judge and the ones they approved: drafts first, then the
    approved, newest first in each. Rejected ones are left out."""
    return list(
        Procedure.objects.filter(owner_id=owner_id, status__in=PROCEDURES_LISTED).order_by(
            Case(When(status=Procedure.Status.DRAFT, then=0), default=1),
            "-created_at",
            "-id",
        )
    )


def procedure_to_api(procedure: Procedure) -> dict:
    steps = procedure.steps if isinstance(procedure.steps, list) else []
    return {
        "id": procedure.pk,
        "task_kind": procedure.task_kind,
        "title": procedure.title,
        "steps": [str(step.get("text", "")) for step in steps if isinstance(step, dict)],
        "status": procedure.status,
        "created_at": procedure.created_at.isoformat(),
        "decided_at": procedure.decided_at.isoformat() if procedure.decided_at else None,
    }


def procedure_approve(*, procedure_id: int) -> Procedure:
    """The user agrees the agent may follow this procedure."""
    return _procedure_decide(procedure_id, Procedure.Status.APPROVED)


def procedure_reject(*, procedure_id: int) -> Procedure:
    """The user declines it; consolidation will not draft this task kind again."""
    return _procedure_decide(procedure_id, Procedure.Status.REJECTED)


# --- consolidation -----------------------------------------------------------------------
def _in_test_sessions() -> Q:
    """Episodes of test sessions: they teach no profile facts and count toward no procedure."""
    condition = Q(pk__in=[])
    for prefix in settings.TEST_SESSION_PREFIXES:
        condition |= Q(session_id__startswith=prefix)
    return condition


def _fact_candidates(episodes: Sequence[Episode]) -> dict[int, list[FactCandidate]]:
    """Facts per episode id: the configured model reads the requests, else the offline rules."""
    requests = {episode.pk: episode.request for episode in episodes}
    found = model_extract_facts(requests)
    if found is not None:
        return found
    return {pk: extract_facts(text) for pk, text in requests.items()}


def _profile_fact_store(*, owner_id: int, candidate: FactCandidate, session_id: str) -> bool:
    """Insert or update the fact in its slot; True when something changed."""
    now = timezone.now()
    fact = ProfileFact.objects.select_for_update().filter(owner_id=owner_id, key=candidate.key)
    fact = fact.first()
    if fact is None:
        try:
            with transaction.atomic():
                ProfileFact.objects.create(
                    owner_id=owner_id,
                    key=candidate.key,
                    text=candidate.text,
                    source_session_id=session_id,
                    confidence=candidate.confidence,
                    created_at=now,
                    updated_at=now,
                )
            return True
        except IntegrityError:
            # Another consolidation created this slot a moment ago; update it instead.
            fact = ProfileFact.objects.select_for_update().get(owner_id=owner_id, key=candidate.key)
    if fact.text == candidate.text:
        return False
    fact.text = candidate.text
    fact.source_session_id = session_id
    fact.confidence = candidate.confidence
    fact.updated_at = now
    fact.save(update_fields=["text", "source_session_id", "confidence", "updated_at"])
    return True


def _procedure_draft_if_due(*, owner_id: int, task_kind: str) -> bool:
    """Draft a procedure once a task kind has succeeded three times; True when one was drafted.

    Never a second one: a kind that already has a procedure — draft, approved or rejected —
    is left alone, so re-running consolidation and a user's "no" are both respected.
    """
    if task_kind == "conversation":
        return False
    if Procedure.objects.filter(owner_id=owner_id, task_kind=task_kind).exists():
        return False
    successes = list(
        Episode.objects.filter(owner_id=owner_id, task_kind=task_kind, outcome=COMPLETED)
        .exclude(_in_test_sessions())
        .order_by("created_at", "id")
        .values_list("id", "tools_used")
    )
    if len(successes) < PROCEDURE_SUCCESSES:
        return False
    steps = procedure_steps([tools for _, tools in successes])
    if not steps:
        return False
    try:
        with transaction.atomic():
            Procedure.objects.create(
                owner_id=owner_id,
                task_kind=task_kind,
                title=f"How to handle {task_kind} requests",
                steps=steps,
                source_episode_ids=[pk for pk, _ in successes],
            )
    except IntegrityError:
        return False  # a concurrent consolidation drafted it first
    return True


def memory_consolidate(*, session_id: str) -> dict[str, int]:
    """Turn a session's unconsolidated episodes into profile facts and procedure drafts.

    Steps: read the pending episodes; extract fact candidates from the user's requests
    (offline extractor, or the configured model — outside any transaction, since a model call
    may take seconds); then in one short transaction lock the episodes that are still pending
    (a concurrent run that got there first leaves none), store their facts in the owner's
    slots (later statements win), mark them consolidated and draft a procedure for each task
    kind that has now succeeded three times. Running it again finds nothing pending and adds
    nothing. Sessions without an owner teach no user anything: their episodes are only
    marked. Test sessions teach nothing either and are skipped altogether. The model calls
    of the extraction go to the session's usage ledger (docs/design.md §22).
    """
    result = {"episodes": 0, "facts": 0, "procedures": 0}
    if is_test_session(session_id):
        return result
    pending = list(
        Episode.objects.filter(session_id=session_id, consolidated_at__isnull=True).order_by(
            "first_seq", "id"
        )
    )
    if not pending:
        return result
    with model_calls_counted() as calls:
        candidates = _fact_candidates([episode for episode in pending if episode.owner_id])

    with transaction.atomic():
        # Lock the pending rows: two runs of one session (idle sweep and session end) must
        # not both store the same episodes' facts.
        claimed = list(
            Episode.objects.select_for_update()
            .filter(pk__in=[episode.pk for episode in pending], consolidated_at__isnull=True)
            .order_by("first_seq", "id")
        )
        # What the question cost is the session's, whichever run keeps the facts (§22).
        for model, usage in calls:
            usage_ledger_add(
                session_id=session_id,
                source=CONSOLIDATION,
                model=model,
                usage=usage,
                seq=max(episode.last_seq for episode in pending),
            )
        if not claimed:
            return result
        for episode in claimed:
            if episode.owner_id is None:
                continue
            for candidate in candidates.get(episode.pk, ()):
                if _profile_fact_store(
                    owner_id=episode.owner_id, candidate=candidate, session_id=session_id
                ):
                    result["facts"] += 1
        Episode.objects.filter(pk__in=[episode.pk for episode in claimed]).update(
            consolidated_at=timezone.now()
        )
        result["episodes"] = len(claimed)
        kinds = {(e.owner_id, e.task_kind) for e in claimed if e.owner_id is not None}
        for owner_id, task_kind in sorted(kinds):
            if _procedure_draft_if_due(owner_id=owner_id, task_kind=task_kind):
                result["procedures"] += 1
    logger.info("consolidated session %s: %s", session_id, result)
    return result


def memory_idle_sessions(*, now: datetime) -> list[str]:
    """Sessions idle for CONSOLIDATE_IDLE_SEC at `now` with pending episodes, longest idle
    first. Idle means the newest episode is older than the threshold; test sessions never are.
    """
    threshold = now - timedelta(seconds=settings.CONSOLIDATE_IDLE_SEC)
    return list(
        Episode.objects.values("session_id")
        .annotate(
            newest=Max("created_at"),
            pending=Count("id", filter=Q(consolidated_at__isnull=True)),
        )
        .filter(pending__gt=0, newest__lt=threshold)
        .exclude(_in_test_sessions())
        .order_by("newest")
        .values_list("session_id", flat=True)
    )


def memory_has_pending_episodes(*, session_id: str) -> bool:
    return Episode.objects.filter(session_id=session_id, consolidated_at__isnull=True).exists()


# --- memory in the model's context ------------------------------------------------------
def memory_in_context_set(*, owner_id: int, enabled: bool) -> None:
    """Let (or stop) the person's profile facts and approved procedures into their
    conversations' system prompt from the next turn on (docs/design.md §22)."""
    MemoryPreference.objects.update_or_create(owner_id=owner_id, defaults={"in_context": enabled})
