"""Sessions, their entries and proactive notices (docs/design.md §3).

Sessions, entries, notices, live connections and approval requests are read and written
only by the store package (`sessions_app/store/`): the `db` backend all of them, the
connection registry and approval requests under both backends, the jsonl backend its anchor
rows. Worker heartbeats belong to their service (`workers.py`); schedules and the outbound
outbox live in notices_app. Entry bodies are read in `seq` order and never
by timestamp.
"""

from django.conf import settings
from django.db import models


class Session(models.Model):
    id = models.CharField(primary_key=True, max_length=200)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="jarvis_sessions",
    )
    agent = models.CharField(max_length=100, default="jarvis")
    parent = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="branches"
    )
    branched_at_seq = models.PositiveBigIntegerField(null=True, blank=True)
    title = models.CharField(max_length=200, blank=True, default="")
    created_at = models.DateTimeField()
    updated_at = models.DateTimeField(help_text="last activity")
    last_seq = models.PositiveBigIntegerField(default=0, help_text="highest seq handed out")
    # "" means the agent's model, else JARVIS_MODEL; changed by /model and PATCH.
    model = models.CharField(max_length=200, blank=True, default="")
    # The session whose `delegate` call created this sub-agent session. A plain id, not a
    # foreign key: it must survive the calling session's delete, so that cleanup can tell
    # a sub-agent whose parent is gone. NULL (not "") for ordinary sessions, so that the
    # partial index below holds sub-agent sessions only.
    spawned_by = models.CharField(max_length=200, null=True, blank=True)  # noqa: DJ001
    # How hard the model thinks (docs/design.md §20): off, low, medium or high; changed by
    # /think and PATCH, and sent to the provider with every request of a turn.
    thinking = models.CharField(max_length=8, default="off", db_default="off")
    # The person's order of the list (docs/design.md §24): pinned ones first, archived ones
    # only when asked for. Not activity: changing them leaves `updated_at` alone.
    pinned = models.BooleanField(default=False, db_default=False)
    archived = models.BooleanField(default=False, db_default=False)
    # Turn lease (docs/design.md §5.5): one turn per session across processes. A holder renews the
    # expiry while its turn runs; a crashed holder's lease simply runs out.
    lease_holder = models.CharField(max_length=64, blank=True, default="")
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    # A new token every time the id is created: a turn records the one it started on, and
    # every write it makes is refused once the session was deleted (and maybe re-created,
    # even by another user) under it.
    incarnation = models.CharField(max_length=32, blank=True, default="")

    class Meta:
        indexes = [
            models.Index(fields=["owner", "-updated_at"], name="session_owner_activity"),
            models.Index(fields=["-updated_at"], name="session_activity"),
            models.Index(fields=["agent"], name="session_agent"),
            models.Index(
                fields=["spawned_by"],
                condition=models.Q(spawned_by__isnull=False),
                name="session_spawned_by",
            ),
        ]

    def __str__(self) -> str:
        return self.id


class Entry(models.Model):
    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="entries")
    seq = models.PositiveBigIntegerField()
    kind = models.CharField(max_length=32)
    role = models.CharField(max_length=16, blank=True, default="")
    content = models.TextField(blank=True, default="")
    tool_calls = models.JSONField(null=True, blank=True)
    tool_call_id = models.CharField(max_length=200, blank=True, default="")
    name = models.CharField(max_length=200, blank=True, default="")
    is_error = models.BooleanField(default=False)
    model = models.CharField(max_length=200, blank=True, default="")
    usage = models.JSONField(null=True, blank=True)
    turn_id = models.CharField(max_length=64, blank=True, default="")
    data = models.JSONField(null=True, blank=True)
    created_at = models.DateTimeField()
    # The entry's schema version (docs/design.md §20). The database default makes every row
    # stored before versions existed a version 1, without rewriting them.
    v = models.PositiveSmallIntegerField(default=1, db_default=1)

    class Meta:
        verbose_name_plural = "entries"
        ordering = ["session", "seq"]
        constraints = [
            # The guard that makes seq trustworthy even where row locks do not exist (SQLite).
            models.UniqueConstraint(fields=["session", "seq"], name="entry_unique_session_seq"),
        ]
        indexes = [
            # A turn's start finds the session's latest compaction here, in a walk of its
            # compactions only. Through the (session, seq) index the walk's plan depends on the
            # table's statistics: a session grown since the last ANALYZE was read whole
            # (3 ms at 10,000 entries, docs/performance.md).
            models.Index(
                fields=["session", "seq"],
                condition=models.Q(kind="compaction"),
                name="entry_compaction_seq",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.session_id}#{self.seq} {self.kind}"


class RequestHeader(models.Model):
    """What a turn's requests share besides the conversation — system prompt, tool schemas,
    parameters, thinking — stored once per distinct value (docs/design.md §20).

    Keyed by the SHA-256 of its canonical JSON (store/request_headers.py); `turn_start`
    entries name it. Shared by every session that sent the same header, so no session's
    delete removes it.
    """

    digest = models.CharField(primary_key=True, max_length=64)
    body = models.JSONField()
    created_at = models.DateTimeField()

    def __str__(self) -> str:
        return self.digest


class ProactiveNotice(models.Model):
    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="notices")
    message_id = models.CharField(max_length=200)
    content = models.TextField()
    created_at = models.DateTimeField()
    delivered_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["session", "created_at", "id"]
        constraints = [
            models.UniqueConstraint(
                fields=["session", "message_id"], name="notice_unique_session_message"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.session_id}:{self.message_id}"


class LiveConnection(models.Model):
    """One open WebSocket, shared by every worker process through the database.

    A worker renews `heartbeat_at` while the socket is open; rows of a crashed worker stop
    being renewed and are ignored once older than the heartbeat timeout.
    """

    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="connections")
    channel_name = models.CharField(max_length=200, unique=True)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.CASCADE
    )
    connected_at = models.DateTimeField()
    heartbeat_at = models.DateTimeField()
    # The worker process holding the socket: when that worker stops heartbeating, its
    # connections stop counting at once, without waiting for each row to age out.
    worker_id = models.CharField(max_length=64, blank=True, default="")

    class Meta:
        indexes = [models.Index(fields=["session", "heartbeat_at"], name="connection_live")]

    def __str__(self) -> str:
        return f"{self.session_id} via {self.channel_name}"


class Worker(models.Model):
    """A server process that holds sockets or turn leases, and its last sign of life.

    Each worker renews `heartbeat_at` every few seconds from a thread of its own. A worker
    silent for WORKER_DEAD_SEC is dead wherever it ran: its connections no longer block a
    delete and its turn leases are free. A worker with no row at all is judged by the older,
    slower rules (connection heartbeats, lease expiry).
    """

    id = models.CharField(primary_key=True, max_length=64)
    started_at = models.DateTimeField()
    heartbeat_at = models.DateTimeField(db_index=True)

    def __str__(self) -> str:
        return self.id


class ToolApproval(models.Model):
    """A tool call waiting for (or given) the person's yes or no.

    `session_id` is a plain id, not a foreign key: on the jsonl backend the conversation has
    no row, and the delete removes these rows itself on every backend. The waiting worker
    (`worker_id`) closes its row at every ending; a pending row whose worker died is closed by
    the repair on the session's next use.
    """

    PENDING = "pending"
    ALLOWED = "allowed"
    DENIED = "denied"
    TIMED_OUT = "timed_out"
    ABORTED = "aborted"
    INTERRUPTED = "interrupted"
    STATUSES = [
        (PENDING, "pending"),
        (ALLOWED, "allowed"),
        (DENIED, "denied"),
        (TIMED_OUT, "timed out"),
        (ABORTED, "aborted"),
        (INTERRUPTED, "interrupted"),
    ]

    session_id = models.CharField(max_length=200)
    turn_id = models.CharField(max_length=64)
    call_id = models.CharField(max_length=200)
    tool = models.CharField(max_length=200)
    arguments = models.JSONField(default=dict)
    status = models.CharField(max_length=16, choices=STATUSES, default=PENDING)
    worker_id = models.CharField(max_length=64, blank=True, default="")
    created_at = models.DateTimeField()
    decided_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            # Also the index of every lookup: by session, and by session and call.
            models.UniqueConstraint(
                fields=["session_id", "call_id"], name="approval_unique_session_call"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.session_id}:{self.call_id} {self.status}"


class ImportedSession(models.Model):
    """A session `import_sessions` brought in, by what it was in the source installation.

    A session of an export is known by its id and creation time there (`source_id`,
    `source_created_at`): ids alone repeat across installations ("chat-1"), the pair does
    not. Importing the same directory again finds these rows and adds nothing. `session_id`
    is a plain id, not a foreign key (the jsonl backend has no session row); a session
    deleted since its import is imported again.
    """

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="imported_sessions"
    )
    source_id = models.CharField(max_length=200)
    source_created_at = models.DateTimeField()
    session_id = models.CharField(max_length=200)
    imported_at = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["owner", "source_id", "source_created_at"],
                name="imported_session_unique_source",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.source_id} → {self.session_id}"


class QueuedPrompt(models.Model):
    """A prompt sent while its session's turn ran (docs/design.md §18): `queue` runs as a
    later turn, `steer` joins the running turn at its next step boundary (or runs as the
    first later turn when that turn ended first). A row is the prompt's only copy until a
    turn stores it as a user message, in the same transaction that deletes the row.

    A plain session id, not a foreign key: the jsonl backend keeps no session row, and the
    delete service removes the queue with the session on both backends. `incarnation` fences
    the row to the session it was sent to: a row of an earlier incarnation never runs."""

    id = models.CharField(primary_key=True, max_length=40)
    session_id = models.CharField(max_length=200)
    incarnation = models.CharField(max_length=32)
    owner_id = models.BigIntegerField(null=True, blank=True)
    kind = models.CharField(max_length=8)  # queue | steer
    text = models.TextField()
    # The files the prompt carries (docs/design.md §23): what its user message will keep as
    # `data.attachments`, checked when it was queued.
    attachments = models.JSONField(null=True, blank=True)
    # Run order within the session: appended at the end, or before every other (interrupt).
    rank = models.BigIntegerField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        indexes = [models.Index(fields=["session_id", "rank"], name="queued_prompt_order")]

    def __str__(self) -> str:
        return f"{self.kind} {self.id} of {self.session_id}"


class ModelUsage(models.Model):
    """The usage of a model call made for a session that none of its entries carries
    (docs/design.md §22): a delegated sub-agent's turn (the sub-agent's session may be gone
    — a per_task one is deleted when the call returns — and a per_agent one serves many
    callers), and consolidation's questions about the session. A turn's own calls, its
    compaction and branch summaries keep their usage on their entries.

    A plain session id, not a foreign key: the jsonl backend keeps no session row; the
    store's `delete` removes a session's rows on both backends; a branch copies the rows
    up to its cut (`usage_ledger_copy`)."""

    SUB_AGENT = "sub_agent"
    CONSOLIDATION = "consolidation"
    TITLE = "title"
    SOURCES = [
        (SUB_AGENT, "sub-agent turn"),
        (CONSOLIDATION, "consolidation"),
        (TITLE, "title"),
    ]

    session_id = models.CharField(max_length=200)
    source = models.CharField(max_length=16, choices=SOURCES)
    # The sub-agent's name for a sub-agent turn; "" for consolidation.
    agent = models.CharField(max_length=64, blank=True, default="")
    model = models.CharField(max_length=200)
    input_tokens = models.PositiveBigIntegerField(default=0)
    output_tokens = models.PositiveBigIntegerField(default=0)
    cached_tokens = models.PositiveBigIntegerField(default=0)
    reasoning_tokens = models.PositiveBigIntegerField(default=0)
    # The session's last seq when the usage was kept: a branch cut at or after it gets a copy
    # of the row, counted as inherited (seq ≤ branched_at_seq), as its copied entries are.
    seq = models.PositiveBigIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        indexes = [models.Index(fields=["session_id"], name="model_usage_session")]

    def __str__(self) -> str:
        return f"{self.source} usage of {self.session_id} ({self.model})"


class Blob(models.Model):
    """The bytes of an uploaded file, stored once by their SHA-256 in the `blobs` storage
    (docs/design.md §23). Entries, exports and frames name a blob by this id and never hold
    its bytes.

    A blob lives while a `BlobLink` names it; `blobs_sweep` removes the others, the row and
    the file together under the row's lock, so an upload that links it at the same moment
    either keeps it or writes it again (store/blobs.py)."""

    IMAGE = "image"
    TEXT = "text"
    PDF = "pdf"
    # Any other file a sandbox run wrote in its workspace (docs/design.md §28): kept and
    # downloadable, never sent to a model as its content.
    DATA = "data"
    KINDS = [(IMAGE, "image"), (TEXT, "text"), (PDF, "PDF"), (DATA, "other data")]

    sha256 = models.CharField(primary_key=True, max_length=64)
    size = models.PositiveBigIntegerField()
    mime = models.CharField(max_length=100)
    kind = models.CharField(max_length=8, choices=KINDS)
    width = models.PositiveIntegerField(null=True, blank=True)
    height = models.PositiveIntegerField(null=True, blank=True)
    created_at = models.DateTimeField()

    def __str__(self) -> str:
        return f"{self.sha256[:12]} {self.mime}"


class BlobLink(models.Model):
    """A file uploaded to a session: the session may attach it to its prompts, its owner may
    read it back. One link per (session, blob): the name is the one it was first uploaded
    under. A branch gets copies of its parent's links; deleting a session (or its account)
    removes them.

    A plain session id, not a foreign key: the jsonl backend keeps no session row. `owner`
    is whom the quota counts against."""

    blob = models.ForeignKey(Blob, on_delete=models.PROTECT, related_name="links")
    session_id = models.CharField(max_length=200)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.CASCADE
    )
    name = models.CharField(max_length=255)
    created_at = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["session_id", "blob"], name="blob_link_unique"),
        ]
        indexes = [models.Index(fields=["owner"], name="blob_link_owner")]

    def __str__(self) -> str:
        return f"{self.session_id}: {self.name}"


class ShareLink(models.Model):
    """A read-only link to a session up to a seq (docs/design.md §24).

    Only the SHA-256 of the token is kept: the token is shown once, at creation, and a
    database dump cannot be turned into working links. A plain session id with the session's
    incarnation, not a foreign key: the jsonl backend keeps no session row, and a share of a
    session deleted and created again under the same id must not show the new one. The
    session's delete removes its links (sessions_app.services.receivers).
    """

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="share_links"
    )
    session_id = models.CharField(max_length=200)
    session_incarnation = models.CharField(max_length=32)
    token_hash = models.CharField(max_length=64, unique=True)
    upto_seq = models.PositiveBigIntegerField()
    include_tools = models.BooleanField(default=False)
    created_at = models.DateTimeField()
    expires_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [models.Index(fields=["session_id"], name="share_link_session")]

    def __str__(self) -> str:
        return f"share {self.pk} of {self.session_id}"
