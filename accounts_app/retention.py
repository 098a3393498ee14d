"""Retention (docs/design.md §21): sessions idle longer than their owner's policy are
deleted, memory first, through the same service as a person's own delete.

The same sweep removes the export files older than EXPORT_RETENTION_DAYS (§31): a session's
delete leaves its exports to their owner, and this is where they end.

The policy of a session: a test session (§6 prefixes) keeps TEST_SESSION_RETENTION_DAYS (or
the owner's policy when shorter); any other keeps the owner's `retention_days`, else the
operator's RETENTION_DAYS, else forever. Idle means `updated_at` (last activity) older than
that many days.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

from django.conf import settings
from django.contrib.auth import get_user_model
from django.utils import timezone

from accounts_app.models import RetentionSetting
from sessions_app import selectors
from sessions_app.core.ids import is_test_session
from sessions_app.services.deletion import SessionConnected, session_delete
from sessions_app.services.extensions import SessionBusy
from sessions_app.services.kept_exports import kept_exports_sweep
from sessions_app.services.sessions import session_turn_running

logger = logging.getLogger(__name__)


def retention_days_of(*, owner_id: int) -> int | None:
    """The user's own policy in days; None when they follow the operator's."""
    return (
        RetentionSetting.objects.filter(owner_id=owner_id)
        .values_list("retention_days", flat=True)
        .first()
    )


def retention_days_set(*, owner_id: int, retention_days: int | None) -> None:
    """Set (or with None, clear) the user's own policy."""
    RetentionSetting.objects.update_or_create(
        owner_id=owner_id, defaults={"retention_days": retention_days}
    )


@dataclass(frozen=True)
class Expired:
    session_id: str
    owner_id: int
    updated_at: datetime
    days: int


@dataclass
class RetentionReport:
    dry_run: bool
    as_of: datetime
    deleted: list[Expired] = field(default_factory=list)
    # (session, why it stays for now); the next sweep tries again.
    kept: list[tuple[Expired, str]] = field(default_factory=list)
    # Export files past EXPORT_RETENTION_DAYS.
    exports: list[Path] = field(default_factory=list)

    def lines(self) -> list[str]:
        verb = "would delete" if self.dry_run else "deleted"
        lines = [
            f"{verb} {item.session_id} of user {item.owner_id} "
            f"(idle since {item.updated_at:%Y-%m-%d}, policy {item.days} days)"
            for item in self.deleted
        ]
        lines += [f"kept {item.session_id} for now: {why}" for item, why in self.kept]
        lines.append(f"{len(self.deleted)} session(s) {verb} as of {self.as_of.isoformat()}")
        if self.exports:
            days = settings.EXPORT_RETENTION_DAYS
            removed = "would remove" if self.dry_run else "removed"
            lines.append(f"{removed} {len(self.exports)} export file(s) older than {days} days")
        return lines


def _session_days(session_id: str, owner_days: int | None) -> int | None:
    if not is_test_session(session_id):
        return owner_days
    test_days = settings.TEST_SESSION_RETENTION_DAYS
    return test_days if owner_days is None else min(test_days, owner_days)


def retention_expired(*, as_of: datetime) -> list[Expired]:
    """Every session past its policy as of `as_of`, oldest first.

    A sub-agent session whose calling session still exists is left to that session: it
    goes with it (per_parent_session) or outlives it (per_agent), never before it.
    """
    own_days = dict(
        RetentionSetting.objects.exclude(retention_days=None).values_list(
            "owner_id", "retention_days"
        )
    )
    expired = []
    for owner_id in get_user_model().objects.order_by("pk").values_list("pk", flat=True):
        owner_days = own_days.get(owner_id, settings.RETENTION_DAYS)
        metas = selectors.sessions_of_owner(owner_id=owner_id)
        present = {meta.id for meta in metas}
        for meta in metas:
            if meta.spawned_by and meta.spawned_by in present:
                continue
            days = _session_days(meta.id, owner_days)
            if days is not None and meta.updated_at < as_of - timedelta(days=days):
                expired.append(Expired(meta.id, owner_id, meta.updated_at, days))
    return sorted(expired, key=lambda item: item.updated_at)


def retention_sweep(*, as_of: datetime | None = None, dry_run: bool = False) -> RetentionReport:
    """Delete every session past its policy (`retention_expired`); the report says which.

    Steps for each: skip it while a turn of it runs (a delete would abort the turn) or a
    socket is attached (SessionConnected); else `session_delete`, the service a person's
    own delete uses: memory first (the `session_deleted` receivers purge in its
    transaction), then the session with its entries, notices, search rows and files, then
    its per_parent_session sub-agent sessions. Each session is one delete of its own, so a
    sweep stopped halfway leaves whole sessions, and the next one carries on. Last, the
    export files written more than EXPORT_RETENTION_DAYS before `as_of` go.
    """
    as_of = as_of or timezone.now()
    report = RetentionReport(dry_run=dry_run, as_of=as_of)
    for item in retention_expired(as_of=as_of):
        if dry_run:
            report.deleted.append(item)
            continue
        if session_turn_running(session_id=item.session_id):
            report.kept.append((item, "a turn is running"))
            continue
        try:
            gone = session_delete(session_id=item.session_id, owner_id=item.owner_id)
        except SessionConnected:
            report.kept.append((item, "open in a browser tab or another client"))
            continue
        except SessionBusy:
            report.kept.append((item, "a turn is running"))
            continue
        if gone:
            report.deleted.append(item)
    report.exports = kept_exports_sweep(as_of=as_of, dry_run=dry_run)
    if report.deleted and not dry_run:
        logger.info("retention deleted %d session(s)", len(report.deleted))
    if report.exports and not dry_run:
        logger.info("retention removed %d export file(s)", len(report.exports))
    return report
