"""Reads of sessions, their entries, notices and context, shaped as the API, the WebSocket
and the chat page show them.

Ownership is checked here: a session that is missing and a session of another user look the
same to the caller (SessionNotFound -> 404 / close 4404), so ids cannot be probed.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Iterator
from typing import Any

from django.conf import settings

from sessions_app.core import frames, limits
from sessions_app.core.ids import validate_session_id
from sessions_app.core.owners import OwnerId, may_act_on
from sessions_app.runtime.context import history
from sessions_app.runtime.context.context_window import budget_for, request_tokens
from sessions_app.runtime.turn.agents import model_for_session
from sessions_app.runtime.turn.memory_context import system_prompt_for
from sessions_app.runtime.turn.prompts import default_system_prompt
from sessions_app.runtime.turn.queue import queue_list
from sessions_app.store import (
    EntryRecord,
    Notice,
    SessionMeta,
    SessionNotFound,
    get_store,
)
from sessions_app.store import approvals as approval_rows

MAX_ENTRIES_PAGE = 1000
# Entries the snapshot reads at once from the end; older ones in growing chunks if they fit.
SNAPSHOT_FIRST_READ = 200
# Every stored field of an entry but its session id: the URL or the socket already names it.
ENTRY_API_FIELDS = tuple(name for name in EntryRecord.__dataclass_fields__ if name != "session_id")


def session_get(*, session_id: str, owner_id: OwnerId) -> SessionMeta:
    """The session when `owner_id` may act on it (sessions_app.core.owners); SessionNotFound
    when it is missing or someone else's — the one ownership check of every door."""
    validate_session_id(session_id)
    meta = get_store().get_meta(session_id)
    if meta is None or not may_act_on(meta.owner_id, owner_id):
        raise SessionNotFound(session_id)
    return meta


def session_find(*, session_id: str) -> SessionMeta | None:
    """The session whoever owns it, None when there is none: for the server's own work on a
    session it was handed (a notice's delivery, a tool inside that session's turn), never
    for a person's request — that is `session_get`."""
    return get_store().get_meta(session_id)


def sessions_of_owner(*, owner_id: int) -> list[SessionMeta]:
    """Every session of the user, sub-agents' and test sessions included, newest first."""
    return get_store().list(owner_id=owner_id)


def session_to_api(meta: SessionMeta) -> dict[str, Any]:
    return {
        "id": meta.id,
        "agent": meta.agent,
        "title": meta.title,
        "parent_id": meta.parent_id,
        "branched_at_seq": meta.branched_at_seq,
        "created_at": meta.created_at.isoformat(),
        "updated_at": meta.updated_at.isoformat(),
        "last_seq": meta.last_seq,
        "model": meta.model,
        "spawned_by": meta.spawned_by,
        "thinking": meta.thinking,
        "pinned": meta.pinned,
        "archived": meta.archived,
    }


def session_list(
    *,
    owner_id: int | None,
    agent: str | None = None,
    include_tests: bool = True,
    include_subagents: bool = False,
    archived: bool | None = False,
    limit: int | None = None,
    offset: int = 0,
) -> list[dict[str, Any]]:
    """The caller's sessions, pinned ones first, then newest activity first; reads only
    metadata, never entries. `limit` of them after the first `offset` (None: all).

    Sub-agent sessions (made by `delegate`) are left out unless `include_subagents`; archived
    ones are listed instead of the others with `archived=True` (None: all).
    """
    metas = get_store().list(
        owner_id=owner_id,
        agent=agent,
        include_tests=include_tests,
        include_subagents=include_subagents,
        archived=archived,
    )
    # A stable sort: within pinned and unpinned, the store's activity order stays.
    metas.sort(key=lambda meta: not meta.pinned)
    end = None if limit is None else offset + limit
    return [session_to_api(meta) for meta in metas[offset:end]]


def session_agent_conflict(*, session_id: str, owner_id: int, agent: str) -> str | None:
    """The agent of the caller's existing session when it is not `agent`, else None.

    A missing session, or another user's, is no conflict here: opening it decides.
    """
    meta = get_store().get_meta(validate_session_id(session_id))
    if meta is None or meta.owner_id != owner_id or meta.agent == agent:
        return None
    return meta.agent


def session_delivery_target(*, owner_id: int) -> SessionMeta | None:
    """The conversation that receives what the agent says first (a schedule's result, a goal).

    The user's most recently active session that is neither a test session (test traffic
    never reaches a real conversation, nor a real result a test one) nor a sub-agent's.
    None when there is no such session: the caller makes a new one.
    """
    metas = get_store().list(owner_id=owner_id, include_tests=False, include_subagents=False)
    return metas[0] if metas else None


def session_detail(*, session_id: str, owner_id: int) -> dict[str, Any]:
    """Meta plus entry counts (total, and per kind; messages also per role)."""
    meta = session_get(session_id=session_id, owner_id=owner_id)
    entries = get_store().get_messages(session_id)
    counts: Counter[str] = Counter()
    for entry in entries:
        counts[entry.kind] += 1
        if entry.kind == "message":
            counts[f"message.{entry.role}"] += 1
    return {**session_to_api(meta), "entry_counts": {"total": len(entries), **counts}}


def entry_to_api(entry: EntryRecord) -> dict[str, Any]:
    """An entry as the API and WebSocket show it: every stored field, times in ISO 8601.

    A shallow copy, not `dataclasses.asdict`: every streamed entry of a turn passes through
    here, and asdict's deep copy of the JSON fields was most of the cost. The result is
    only ever serialised, never changed, so sharing the record's nested values is safe.
    """
    data = {field: getattr(entry, field) for field in ENTRY_API_FIELDS}
    data["created_at"] = entry.created_at.isoformat()
    return data


def notice_to_api(notice: Notice) -> dict[str, Any]:
    return {
        "message_id": notice.message_id,
        "content": notice.content,
        "created_at": notice.created_at.isoformat(),
        "delivered_at": notice.delivered_at.isoformat() if notice.delivered_at else None,
    }


def session_entries(
    *,
    session_id: str,
    owner_id: int,
    after_seq: int = 0,
    before_seq: int | None = None,
    limit: int | None = None,
) -> dict[str, Any]:
    """A page of entries in seq order, and the cursors that continue after and before it
    (`next_before_seq` is null when nothing comes before the page).

    With `before_seq`: the latest entries before it (and after `after_seq`), at most `limit`
    of them and (but for the first) no more than SNAPSHOT_BUDGET_BYTES of JSON, so a page
    scrolling back through large messages loads a screenful at a time.
    """
    meta = session_get(session_id=session_id, owner_id=owner_id)
    limit = MAX_ENTRIES_PAGE if limit is None else min(limit, MAX_ENTRIES_PAGE)
    if before_seq is None:
        entries = get_store().get_messages(session_id, after_seq=after_seq, limit=limit)
        return {
            "entries": [entry_to_api(entry) for entry in entries],
            "next_after_seq": entries[-1].seq if entries else after_seq,
            "next_before_seq": entries[0].seq if entries and entries[0].seq > 1 else None,
        }
    before_seq = min(before_seq, meta.last_seq + 1)
    shown: list[dict[str, Any]] = []
    used = 0
    for entry in _entries_before(session_id, before_seq=before_seq, floor=after_seq, limit=limit):
        data = entry_to_api(entry)
        size = frames.encode(data)[1]
        if shown and used + size > settings.SNAPSHOT_BUDGET_BYTES:
            break
        shown.append(data)
        used += size
    shown.reverse()
    first_seq = shown[0]["seq"] if shown else before_seq
    return {
        "entries": shown,
        "next_after_seq": shown[-1]["seq"] if shown else before_seq - 1,
        "next_before_seq": first_seq if first_seq > 1 else None,
    }


def _entries_before(
    session_id: str, *, before_seq: int, floor: int, limit: int | None = None
) -> Iterator[EntryRecord]:
    """The entries with floor < seq < before_seq, newest first, read in growing chunks.

    A session's seqs run from 1 to last_seq without gaps (one counter hands them out, and
    entries leave only with their session), so the n entries before a seq are the ones after
    that seq minus n + 1: each chunk is a plain `get_messages` range on every backend.
    """
    store = get_store()
    upper = before_seq
    chunk = 100
    while upper - 1 > floor and limit != 0:
        take = upper - 1 - floor if limit is None else min(limit, upper - 1 - floor)
        take = min(take, chunk)
        lower = upper - 1 - take
        records = store.get_messages(session_id, after_seq=lower, limit=take)
        yield from reversed([record for record in records if record.seq < upper])
        upper = lower + 1
        if limit is not None:
            limit -= take
        chunk *= 2


def session_snapshot(
    *,
    session_id: str,
    owner_id: int,
    after_seq: int = 0,
    running: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """What a WebSocket shows on connect, within SNAPSHOT_BUDGET_BYTES of JSON
    (docs/design.md §8): the meta, the latest notices (up to a quarter of the budget), the
    tool calls waiting for the person's answer (so a reloaded tab can give it), and the
    latest entries that fit the rest — an entry larger than the budget as a stub.

    `running` is the state of the session's running turn as read just before (sessions_app.
    live): shown within a quarter of the budget, and the turn's entries stored after it
    are left out, since the socket receives them as the turn's later events (§17).

    `first_seq` is the first entry's seq (one past the last seq when there is none) and
    `has_more` says whether older ones exist. With `after_seq` the entries after it are sent
    when they all fit; otherwise the latest window is, and a `first_seq` above
    `after_seq + 1` tells the client to start over from it.
    """
    meta = session_get(session_id=session_id, owner_id=owner_id)
    store = get_store()
    budget = settings.SNAPSHOT_BUDGET_BYTES
    notices: list[dict[str, Any]] = []
    notices_size = 0
    for notice in reversed(store.get_proactive(session_id)):
        data = notice_to_api(notice)
        notices_size += frames.encode(data)[1]
        if notices_size > budget // 4:
            break
        notices.append(data)
    notices.reverse()
    head = {
        "session": session_to_api(meta),
        "notices": notices,
        "approvals": [
            frames.approval_for_frame(request)
            for request in approvals_pending(session_id=session_id)
        ],
        "running": frames.running_for_frame(running),
        # Prompts waiting for the running turn, in run order (docs/design.md §18).
        "queue": [
            frames.queued_for_frame(waiting.to_api())
            for waiting in queue_list(session_id=session_id, incarnation=meta.incarnation)
        ],
    }
    # What the frame holds besides its entries, counted with the largest first_seq.
    frame_without_entries = {
        "type": "session",
        **head,
        "entries": [],
        "first_seq": limits.SEQ_MAX,
        "has_more": False,
    }
    room = budget - frames.encode(frame_without_entries)[1]
    # One read usually holds the whole window (the jsonl backend reads its file per call);
    # it also takes in entries appended since the meta was read.
    newest_floor = max(after_seq, meta.last_seq - SNAPSHOT_FIRST_READ)
    newest = store.get_messages(session_id, after_seq=newest_floor)
    entries: list[dict[str, Any]] = []
    complete = True
    older = _entries_before(session_id, before_seq=newest_floor + 1, floor=after_seq)
    for entry in itertools.chain(reversed(newest), older):
        if running and entry.turn_id == running["turn_id"] and entry.seq > running["entry_seq"]:
            continue
        shown, size = frames.entry_for_frame(entry_to_api(entry))
        room -= size + 2  # and the separator
        if room < 0:
            complete = False
            break
        entries.append(shown)
    entries.reverse()
    if entries:
        first_seq = entries[0]["seq"]
    elif complete:
        first_seq = max(after_seq, meta.last_seq) + 1
    else:
        first_seq = (newest[-1].seq if newest else meta.last_seq) + 1
    return {
        **head,
        "entries": entries,
        "first_seq": first_seq,
        "has_more": first_seq > 1,
    }


def approvals_pending(*, session_id: str) -> list[dict[str, Any]]:
    """The session's tool calls waiting for the person's answer, oldest first (requests of
    a worker known to be dead are left out: nobody would act on the answer)."""
    return [
        {
            "turn_id": request.turn_id,
            "call_id": request.call_id,
            "tool": request.tool,
            "arguments": request.arguments,
            "created_at": request.created_at.isoformat(),
        }
        for request in approval_rows.requests_pending(session_id=session_id)
    ]


def session_notices(*, session_id: str, owner_id: int) -> list[dict[str, Any]]:
    session_get(session_id=session_id, owner_id=owner_id)
    return [notice_to_api(notice) for notice in get_store().get_proactive(session_id)]


def notices_of_sockets(*, sessions: dict[str, int]) -> dict[str, list[dict[str, Any]]]:
    """The notices of the sessions that sockets of this process show (id -> the socket's
    user), in the API's shape; a session that another user now holds shows nothing."""
    found = get_store().get_proactive_owned(sessions)
    return {
        session_id: [notice_to_api(notice) for notice in notices]
        for session_id, notices in found.items()
    }


def session_context(
    *, session_id: str, owner_id: int, fmt: str, tokens_only: bool = False
) -> dict[str, Any]:
    """The projection a model would receive next, checked by the provider's validator, and
    how much of the session's model's window it takes (`tokens {used, window, reserve}`,
    docs/design.md §22).

    A session with no messages yet has an empty conversation, which is its valid context:
    its next turn starts with the user's message (on OpenAI the system prompt is already a
    valid list of messages; Anthropic's "at least one message" applies to a request, and
    no request is made from an empty history).

    `tokens_only` leaves the messages (and Anthropic's system) out of the answer: what the
    page's context meter asks for after every turn.

    Raises ValueError for an unknown format and HistoryInvalid when the stored history
    would be refused by the provider.
    """
    meta = session_get(session_id=session_id, owner_id=owner_id)
    entries = get_store().get_context_entries(session_id)
    # With what memory adds, as the next turn will send it (docs/design.md §22).
    system_prompt = system_prompt_for(agent_prompt=default_system_prompt(meta.agent), meta=meta)
    if fmt == "openai":
        messages = history.project_openai(entries, system_prompt)
        history.validate_openai(messages)
        context = {"format": "openai", "messages": messages}
    elif fmt == "anthropic":
        system, messages = history.project_anthropic(entries, system_prompt)
        if messages:
            history.validate_anthropic(messages)
        context = {"format": "anthropic", "system": system, "messages": messages}
    else:
        raise ValueError(f"format is openai or anthropic, not {fmt!r}")
    label = model_for_session(agent=meta.agent, model=meta.model)
    budget = budget_for(label)
    context["tokens"] = {
        "used": request_tokens(label, context),
        "window": budget.window,
        "reserve": budget.reserve,
    }
    if tokens_only:
        return {"format": context["format"], "tokens": context["tokens"]}
    return context
