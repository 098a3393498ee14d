"""Memory grown from session turns (docs/design.md §9).

Rows refer to sessions by their id string only: memory_app never imports sessions_app's
models, and a session stored by the jsonl backend has no row to point at anyway. Episodes,
thought logs, working memory and compaction summaries are bound to their session and are
purged with it; profile facts and procedures belong to the user and outlive the session that
taught them.
"""

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone

SESSION_ID_LENGTH = 200


class Episode(models.Model):
    """One finished turn: what was asked, what was answered, how it went."""

    session_id = models.CharField(max_length=SESSION_ID_LENGTH)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="memory_episodes",
    )
    turn_id = models.CharField(max_length=64)
    first_seq = models.PositiveBigIntegerField()
    last_seq = models.PositiveBigIntegerField()
    request = models.TextField(blank=True, default="", help_text="the user's message")
    answer = models.TextField(blank=True, default="", help_text="the agent's final answer")
    tools_used = models.JSONField(default=list, blank=True, help_text="tool names in call order")
    outcome = models.CharField(max_length=32, help_text="the turn's status")
    task_kind = models.CharField(max_length=32)
    consolidated_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["session_id", "first_seq"]
        constraints = [
            models.UniqueConstraint(
                fields=["session_id", "turn_id"], name="episode_unique_session_turn"
            ),
        ]
        indexes = [
            models.Index(fields=["session_id", "created_at"], name="episode_session_time"),
            # The idle sweep and consolidation look for the not-yet-consolidated ones.
            models.Index(
                fields=["session_id"],
                condition=Q(consolidated_at__isnull=True),
                name="episode_pending",
            ),
            models.Index(fields=["owner", "task_kind", "outcome"], name="episode_owner_kind"),
        ]

    def __str__(self) -> str:
        return f"{self.session_id} turn {self.turn_id} ({self.task_kind}, {self.outcome})"

    @property
    def consolidated(self) -> bool:
        return self.consolidated_at is not None


class ThoughtLog(models.Model):
    """One step of the agent's intermediate reasoning within a turn, in order."""

    class Kind(models.TextChoices):
        THOUGHT = "thought", "thought"
        TOOL_CALL = "tool_call", "tool call"
        TOOL_RESULT = "tool_result", "tool result"

    episode = models.ForeignKey(Episode, on_delete=models.CASCADE, related_name="thoughts")
    session_id = models.CharField(max_length=SESSION_ID_LENGTH)
    turn_id = models.CharField(max_length=64)
    position = models.PositiveIntegerField()
    seq = models.PositiveBigIntegerField(help_text="the entry this step came from")
    kind = models.CharField(max_length=16, choices=Kind.choices)
    tool_name = models.CharField(max_length=200, blank=True, default="")
    text = models.TextField(blank=True, default="")
    is_error = models.BooleanField(default=False)

    class Meta:
        ordering = ["episode", "position"]
        constraints = [
            models.UniqueConstraint(
                fields=["episode", "position"], name="thought_unique_episode_position"
            ),
        ]
        indexes = [models.Index(fields=["session_id"], name="thought_session")]

    def __str__(self) -> str:
        return f"{self.session_id} turn {self.turn_id} #{self.position} {self.kind}"


class WorkingMemory(models.Model):
    """The agent's per-session scratchpad, written by the `remember` tool."""

    session_id = models.CharField(max_length=SESSION_ID_LENGTH)
    # Whose session it was written in: once the session is gone (a crash between its delete
    # and the purge, a sub-agent that died), this is how `/cleanup stm` knows whose leftover
    # it is. Null for rows of ownerless sessions and rows written before it was kept: only
    # the operator's cleanup (`--all-users`) removes those.
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="working_memory",
    )
    key = models.CharField(max_length=200)
    value = models.TextField()
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        verbose_name_plural = "working memory"
        ordering = ["session_id", "key"]
        constraints = [
            models.UniqueConstraint(
                fields=["session_id", "key"], name="working_memory_unique_session_key"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.session_id}: {self.key}"


class ProfileFact(models.Model):
    """Something the user told about themselves; it belongs to the user, not to a session."""

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="profile_facts"
    )
    key = models.CharField(
        max_length=200,
        help_text="normalized slot: 'name', 'home', 'favorite:color', 'likes:tea' ...",
    )
    text = models.TextField()
    # A plain value, not a relation: the fact stays when that session is deleted.
    source_session_id = models.CharField(max_length=SESSION_ID_LENGTH, blank=True, default="")
    confidence = models.FloatField(default=0.5)
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["owner", "key"]
        constraints = [
            models.UniqueConstraint(fields=["owner", "key"], name="profile_fact_unique_owner_key"),
        ]

    def __str__(self) -> str:
        return self.text


class Procedure(models.Model):
    """How a kind of task was done successfully, drafted by consolidation, judged by the user."""

    class Status(models.TextChoices):
        DRAFT = "draft", "draft"
        APPROVED = "approved", "approved"
        REJECTED = "rejected", "rejected"

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="procedures"
    )
    task_kind = models.CharField(max_length=32)
    title = models.CharField(max_length=200)
    steps = models.JSONField(default=list)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.DRAFT)
    # Ids, not a relation: episodes go with their session, the procedure stays.
    source_episode_ids = models.JSONField(default=list, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    decided_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["owner", "task_kind", "-created_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["owner", "task_kind"],
                condition=Q(status="draft"),
                name="procedure_one_draft_per_kind",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.title} ({self.status})"


class CompactionSummary(models.Model):
    """The summary that stands in for a session's older turns in the model's context."""

    session_id = models.CharField(max_length=SESSION_ID_LENGTH)
    entry_seq = models.PositiveBigIntegerField(help_text="seq of the compaction entry")
    summary = models.TextField()
    first_kept_seq = models.PositiveBigIntegerField()
    tokens_before = models.PositiveIntegerField()
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        verbose_name_plural = "compaction summaries"
        ordering = ["session_id", "entry_seq"]
        constraints = [
            models.UniqueConstraint(
                fields=["session_id", "entry_seq"], name="compaction_unique_session_entry"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.session_id} compacted before #{self.first_kept_seq}"


class MemoryPreference(models.Model):
    """Whether what memory knows about a person goes into their conversations' system prompt
    (`PATCH /api/me/ {"memory_in_context": false}`, docs/design.md §22). No row: it does."""

    owner = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memory_preference"
    )
    in_context = models.BooleanField(default=True)

    def __str__(self) -> str:
        return f"memory of user {self.owner_id} in context: {self.in_context}"
