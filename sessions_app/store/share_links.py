"""Share links' rows (docs/design.md §24): rows of the database under both backends, like
approval requests and the usage ledger. Tokens arrive here already hashed."""

from __future__ import annotations

from datetime import datetime

from django.db.models import Q
from django.utils import timezone

from sessions_app.models import ShareLink


def share_add(
    *,
    owner_id: int,
    session_id: str,
    incarnation: str,
    token_hash: str,
    upto_seq: int,
    include_tools: bool,
    expires_at: datetime | None,
) -> ShareLink:
    return ShareLink.objects.create(
        owner_id=owner_id,
        session_id=session_id,
        session_incarnation=incarnation,
        token_hash=token_hash,
        upto_seq=upto_seq,
        include_tools=include_tools,
        created_at=timezone.now(),
        expires_at=expires_at,
    )


def shares_of(*, session_id: str, owner_id: int) -> list[ShareLink]:
    return list(ShareLink.objects.filter(session_id=session_id, owner_id=owner_id).order_by("id"))


def share_of(*, share_id: int, session_id: str, owner_id: int) -> ShareLink | None:
    return ShareLink.objects.filter(pk=share_id, session_id=session_id, owner_id=owner_id).first()


def share_live_by_hash(token_hash: str) -> ShareLink | None:
    """The link with this token hash unless it expired; revoked links have no row."""
    now = timezone.now()
    return (
        ShareLink.objects.filter(token_hash=token_hash)
        .filter(Q(expires_at__isnull=True) | Q(expires_at__gt=now))
        .first()
    )


def share_move(share: ShareLink, *, upto_seq: int) -> ShareLink:
    share.upto_seq = upto_seq
    share.save(update_fields=["upto_seq"])
    return share


def share_remove(share: ShareLink) -> None:
    share.delete()


def remove_for_session(session_id: str) -> None:
    ShareLink.objects.filter(session_id=session_id).delete()
