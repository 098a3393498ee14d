"""Signals that let memory_app and notices_app follow sessions without sessions_app knowing them.

`session_deleted`, `turn_finished`, `session_compacted` and `notice_added` are sent inside the transaction of
the change they announce, so a receiver that fails rolls the change back. `session_ended` is
sent after its commit: nothing rolls back when a tab closes. The `*_requested` signals ask
the receivers for something instead: the caller reads their answers from `send()`'s return
value.
"""

from django.dispatch import Signal

# kwargs: session_id, owner_id. Sent by the delete service before the session's rows go.
session_deleted = Signal()

# kwargs: session_id, owner_id, turn_id, status, entries (the turn's EntryRecords, turn_start
# through turn_end, in seq order). Sent in the transaction that stores the turn_end.
turn_finished = Signal()

# kwargs: session_id, owner_id. Sent after the commit that removed the last live connection
# of a session.
session_ended = Signal()

# kwargs: session_id, entry_seq, summary, first_kept_seq, tokens_before (the data of the
# `compaction` entry stored at entry_seq). Sent in the transaction that stores that entry.
session_compacted = Signal()

# kwargs: session_id. Sent after the model's title of a conversation was stored (outside any
# transaction: the title is committed).
session_retitled = Signal()

# kwargs: session_id, notice (the store's Notice). Sent by `proactive_add` in the transaction
# that adds a new notice (not for a repeated message_id), so that what a receiver queues for
# it commits with it.
notice_added = Signal()

# kwargs: owner_id (a user's id, or None for every owner's), live_session_ids. Each receiver
# answers {session id: working-memory keys} of the owner's working memory whose session is
# not among the live ones (left by a session that is gone). Sent by cleanup to plan `stm`.
working_memory_orphans_requested = Signal()

# kwargs: session_id, owner_id (as above), written_before. Each receiver forgets the owner's
# working memory of that gone session written before that moment, and answers how many keys
# went. Sent by cleanup's `stm` category, one session at a time.
working_memory_orphan_clear_requested = Signal()
