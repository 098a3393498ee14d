"""`/cleanup` and `manage.py cleanup_sessions`: what can go, and removing it when confirmed.

Categories:
- `agents`: sub-agent sessions whose calling session is gone, or idle CLEANUP_AGENT_DAYS;
  never per_agent sessions (they are kept across conversations on purpose);
- `tests`: test sessions (ids starting with a TEST_SESSION_PREFIXES prefix);
- `stm`: working memory (the `remember` scratchpad) that no longer belongs to a live
  session — left by a session that is gone (a crash between its delete and the purge, a
  sub-agent that died, an old test session). The working memory of an existing session is
  never touched: it is what the person told Jarvis to remember (docs/design.md §29);
- `connections`: live-connection rows of workers that died without closing them.
Sessions go one at a time through `session_delete`, which purges a session's memory before
it erases the session, in one transaction: a run cut short by a crash leaves whole sessions,
and the next run removes only what is left. A user cleans only their own sessions;
`owner_id=OPERATOR` (`cleanup_sessions --all-users`) cleans every user's.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings
from django.utils import timezone

from sessions_app.core.ids import is_test_session
from sessions_app.core.owners import OwnerId, may_act_on, owner_filter
from sessions_app.core.signals import (
    working_memory_orphan_clear_requested,
    working_memory_orphans_requested,
)
from sessions_app.runtime.turn.agents import is_per_agent_session
from sessions_app.runtime.turn.lease import SessionBusy
from sessions_app.services import deletion
from sessions_app.store import SessionMeta, SessionNotFound, connections, get_store

CATEGORIES = ("agents", "tests", "stm", "connections")


@dataclass(frozen=True)
class CleanupPlan:
    agents: list[SessionMeta]
    tests: list[SessionMeta]
    stm: dict[str, int]  # gone session's id -> working-memory keys left
    connections: int

    def size(self, category: str) -> int:
        if category == "stm":
            return len(self.stm)
        if category == "connections":
            return self.connections
        return len(getattr(self, category))


@dataclass
class CleanupReport:
    category: str
    removed: list[str] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (what, why)


def cleanup_plan(*, owner_id: OwnerId, now: datetime | None = None) -> CleanupPlan:
    """What each category would remove for this user (None: every user). Reads only."""
    now = now or timezone.now()
    idle_since = now - timedelta(days=settings.CLEANUP_AGENT_DAYS)
    metas = get_store().list(owner_id=owner_filter(owner_id))
    known = {meta.id for meta in metas}
    agents = [
        meta
        for meta in metas
        if meta.spawned_by is not None
        and not is_per_agent_session(meta.id, meta.agent)
        # A calling session is owned by the same user, so it would be in `known`.
        and (meta.spawned_by not in known or meta.updated_at < idle_since)
    ]
    return CleanupPlan(
        agents=agents,
        tests=[meta for meta in metas if is_test_session(meta.id)],
        stm=_working_memory_orphans(owner_id=owner_id, live=known),
        connections=connections.stale_count(owner_id=owner_filter(owner_id)),
    )


def cleanup_run(
    *,
    owner_id: OwnerId,
    category: str,
    on_progress: Callable[[str], None] = lambda line: None,
) -> CleanupReport:
    """Remove one category of the plan, reporting each step to `on_progress`.

    A session that is open in a tab or running a turn right now is skipped (and named),
    never forced; a rerun picks it up once it is free.
    """
    if category not in CATEGORIES:
        raise ValueError(f"cleanup category is one of {', '.join(CATEGORIES)}, not {category!r}")
    plan = cleanup_plan(owner_id=owner_id)
    report = CleanupReport(category=category)
    if category == "connections":
        stale = connections.stale_remove(owner_id=owner_filter(owner_id))
        report.removed = stale
        on_progress(f"removed {len(stale)} stale connection row(s)")
        return report
    if category == "stm":
        total = len(plan.stm)
        for index, session_id in enumerate(sorted(plan.stm), start=1):
            step = f"[{index}/{total}] {session_id}"
            # Looked at again just before: a session of the caller's made with that id since
            # the plan is live, and so is every row written after this look. (Another
            # person's session with that id never had these rows: they are the caller's.)
            looked_at = timezone.now()
            meta = get_store().get_meta(session_id)
            if meta is not None and may_act_on(meta.owner_id, owner_id):
                report.skipped.append((session_id, "its session exists again"))
                on_progress(f"{step}: skipped, its session exists again")
                continue
            keys = _working_memory_clear(session_id, owner_id=owner_id, written_before=looked_at)
            report.removed.append(session_id)
            on_progress(f"{step}: forgot {keys} working-memory key(s) of a session that is gone")
        return report
    doomed = getattr(plan, category)
    for index, meta in enumerate(doomed, start=1):
        step = f"[{index}/{len(doomed)}] {meta.id}"
        try:
            deleted = deletion.session_delete(session_id=meta.id, owner_id=meta.owner_id)
        except deletion.SessionConnected:
            report.skipped.append((meta.id, "open in a browser tab"))
            on_progress(f"{step}: skipped, open in a browser tab")
            continue
        except SessionBusy:
            report.skipped.append((meta.id, "a turn is running"))
            on_progress(f"{step}: skipped, a turn is running")
            continue
        except SessionNotFound:
            deleted = False
        if deleted:
            report.removed.append(meta.id)
            on_progress(f"{step}: deleted with its memory")
        else:
            on_progress(f"{step}: already gone")
    return report


def _working_memory_orphans(*, owner_id: OwnerId, live: set[str]) -> dict[str, int]:
    """Working-memory keys per gone session, as the apps that keep working memory count
    them: the owner's (every owner's for the operator) whose session is not live."""
    counts: Counter[str] = Counter()
    for _receiver, answer in working_memory_orphans_requested.send(
        sender=__name__, owner_id=owner_filter(owner_id), live_session_ids=live
    ):
        counts.update(answer)
    return dict(counts)


def _working_memory_clear(session_id: str, *, owner_id: OwnerId, written_before: datetime) -> int:
    """Forget the owner's working memory of a gone session; how many keys went."""
    answers = working_memory_orphan_clear_requested.send(
        sender=__name__,
        session_id=session_id,
        owner_id=owner_filter(owner_id),
        written_before=written_before,
    )
    return sum(keys for _receiver, keys in answers)


def plan_text(plan: CleanupPlan, how: str = "/cleanup") -> str:
    """The listing `/cleanup` shows before anything is removed."""
    days = f"{settings.CLEANUP_AGENT_DAYS:g}"
    lines = ["/cleanup would remove:"]
    lines.append(
        f"  agents: {len(plan.agents)} sub-agent session(s) whose conversation is gone "
        f"or idle {days}+ days{_ids(plan.agents)}"
    )
    lines.append(f"  tests: {len(plan.tests)} test session(s){_ids(plan.tests)}")
    keys = sum(plan.stm.values())
    lines.append(
        f"  stm: {keys} working-memory key(s) left by {len(plan.stm)} session(s) that are gone"
        f"{_names(sorted(plan.stm))} (live sessions' working memory is kept)"
    )
    lines.append(f"  connections: {plan.connections} stale connection row(s)")
    lines.append(f"Remove one with: {how} <{'|'.join(CATEGORIES)}> confirm")
    return "\n".join(lines)


def _ids(metas: list[SessionMeta], shown: int = 10) -> str:
    return _names([meta.id for meta in metas], shown)


def _names(ids: list[str], shown: int = 10) -> str:
    if not ids:
        return ""
    names = ", ".join(ids[:shown])
    more = f" and {len(ids) - shown} more" if len(ids) > shown else ""
    return f": {names}{more}"


def report_text(report: CleanupReport) -> str:
    text = f"cleanup {report.category}: removed {len(report.removed)}"
    if report.skipped:
        skipped = ", ".join(f"{what} ({why})" for what, why in report.skipped)
        text += f"; skipped {len(report.skipped)}: {skipped}"
    return text
