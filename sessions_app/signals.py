"""Signals that let memory_app follow sessions without importing sessions_app's models.

Each is sent by a service, inside the transaction of the change it announces, so a receiver
that fails rolls the change back.
"""

from django.dispatch import Signal

# kwargs: session_id, owner_id. Sent by the delete service before the session's rows go.
session_deleted = Signal()

# kwargs: session_id, owner_id, turn_id, status, entries (the turn's EntryRecords, turn_start
# through turn_end, in seq order). Sent in the transaction that stores the turn_end.
turn_finished = Signal()

# kwargs: session_id, owner_id. Sent when the last live connection of a session closes.
session_ended = Signal()
