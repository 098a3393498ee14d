"""Handlers of sessions_app's signals: one call into a service each (STYLE: signals)."""

from memory_app.services import (
    compaction_summary_record,
    episode_record_for_turn,
    memory_purge_for_session,
    working_memory_clear_orphan,
    working_memory_orphans,
)
from memory_app.tasks import memory_consolidate_enqueue


def on_turn_finished(sender, *, session_id, owner_id, turn_id, status, entries, **kwargs):
    episode_record_for_turn(
        session_id=session_id, owner_id=owner_id, turn_id=turn_id, status=status, entries=entries
    )


def on_session_ended(sender, *, session_id, owner_id=None, **kwargs):
    memory_consolidate_enqueue(session_id=session_id)


def on_session_deleted(sender, *, session_id, owner_id=None, **kwargs):
    # Directly, not on commit: the purge is part of the delete's transaction, so a purge that
    # fails keeps the session too.
    memory_purge_for_session(session_id=session_id)


def on_session_compacted(
    sender, *, session_id, entry_seq, summary, first_kept_seq, tokens_before, **kwargs
):
    # Directly, not on commit: on the db backend the summary commits with its entry or not at
    # all.
    compaction_summary_record(
        session_id=session_id,
        entry_seq=entry_seq,
        summary=summary,
        first_kept_seq=first_kept_seq,
        tokens_before=tokens_before,
    )


def on_working_memory_orphans_requested(
    sender, *, owner_id, live_session_ids, **kwargs
) -> dict[str, int]:
    return working_memory_orphans(owner_id=owner_id, live_session_ids=live_session_ids)


def on_working_memory_orphan_clear_requested(
    sender, *, session_id, owner_id, written_before, **kwargs
) -> int:
    return working_memory_clear_orphan(
        session_id=session_id, owner_id=owner_id, written_before=written_before
    )
