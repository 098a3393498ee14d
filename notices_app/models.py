"""Schedules, their runs and the outbound outbox (docs/design.md §14, §16).

These tables were made by sessions_app and moved here with their rows (migrations
`sessions_app.0007` and `notices_app.0001`). Every write goes through this app's services
(`schedules.py`, `delivery.py`).
"""

from django.conf import settings
from django.db import models


class Schedule(models.Model):
    """A reminder or a prompt a user asked for at a time, once or every N minutes/hours/days.

    Each run is a deferred task of the task worker (`db_worker`); `task_id` names the one
    waiting for `next_run_at`. `session_id` is the conversation it was made in, kept as text:
    on the jsonl backend sessions are files, and a schedule outlives its session anyway.
    """

    REMINDER = "reminder"
    PROMPT = "prompt"
    KINDS = [(REMINDER, "reminder"), (PROMPT, "prompt")]
    ACTIVE = "active"
    DONE = "done"
    CANCELLED = "cancelled"
    STATES = [(ACTIVE, "active"), (DONE, "done"), (CANCELLED, "cancelled")]
    UNITS = [("minutes", "minutes"), ("hours", "hours"), ("days", "days")]

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="jarvis_schedules"
    )
    session_id = models.CharField(max_length=200, blank=True, default="")
    kind = models.CharField(max_length=16, choices=KINDS, default=REMINDER)
    text = models.TextField()
    first_run_at = models.DateTimeField()
    repeat_every = models.PositiveIntegerField(null=True, blank=True)
    repeat_unit = models.CharField(max_length=8, choices=UNITS, blank=True, default="")
    next_run_at = models.DateTimeField(null=True, blank=True)
    state = models.CharField(max_length=16, choices=STATES, default=ACTIVE)
    task_id = models.CharField(max_length=64, blank=True, default="")
    created_at = models.DateTimeField()
    cancelled_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [
            models.Index(fields=["owner", "state", "next_run_at"], name="schedule_owner_next"),
        ]

    def __str__(self) -> str:
        return f"#{self.pk} {self.kind}: {self.text[:40]}"


class ScheduleRun(models.Model):
    """One fired run. The unique (schedule, run_at) pair is what makes firing happen once,
    whichever worker, retry or duplicate task gets there first."""

    schedule = models.ForeignKey(Schedule, on_delete=models.CASCADE, related_name="runs")
    run_at = models.DateTimeField()
    fired_at = models.DateTimeField()
    session_id = models.CharField(max_length=200, blank=True, default="")
    message_id = models.CharField(max_length=200, blank=True, default="")
    outcome = models.CharField(max_length=16, default="firing")

    class Meta:
        ordering = ["schedule", "run_at"]
        constraints = [
            models.UniqueConstraint(fields=["schedule", "run_at"], name="schedule_run_once"),
        ]

    def __str__(self) -> str:
        return f"schedule #{self.schedule_id} at {self.run_at.isoformat()}: {self.outcome}"


class NoticeOutbox(models.Model):
    """One notice on its way out through one channel to one destination (docs/design.md §16).

    One row per (notice, channel, destination), so a notice is never queued twice for the
    same place and one channel's failures never hold up another's row. `destination` is the
    channel's own key ("" for a channel with one destination per user; a push subscription's
    id for `webpush`). `state` moves pending -> sending -> sent; a failed attempt goes back to
    pending with the next attempt's time, or to failed when the channel gives up.
    """

    PENDING = "pending"
    SENDING = "sending"
    SENT = "sent"
    FAILED = "failed"
    STATES = [(PENDING, "pending"), (SENDING, "sending"), (SENT, "sent"), (FAILED, "failed")]

    session_id = models.CharField(max_length=200)
    message_id = models.CharField(max_length=200)
    channel = models.CharField(max_length=32, default="webhook")
    destination = models.CharField(max_length=64, blank=True, default="")
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.CASCADE
    )
    payload = models.JSONField()
    state = models.CharField(max_length=16, choices=STATES, default=PENDING)
    attempts = models.PositiveIntegerField(default=0)
    next_attempt_at = models.DateTimeField()
    claimed_at = models.DateTimeField(null=True, blank=True)
    last_error = models.TextField(blank=True, default="")
    task_id = models.CharField(max_length=64, blank=True, default="")
    created_at = models.DateTimeField()
    sent_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name_plural = "notice outbox"
        constraints = [
            models.UniqueConstraint(
                fields=["session_id", "message_id", "channel", "destination"],
                name="outbox_one_per_destination",
            ),
        ]
        indexes = [models.Index(fields=["state", "next_attempt_at"], name="outbox_due")]

    def __str__(self) -> str:
        return f"{self.session_id}:{self.message_id} via {self.channel} ({self.state})"


class NoticeSettings(models.Model):
    """A user's choices about how notices reach them; no row means the defaults."""

    owner = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="notice_settings"
    )
    # A Discord (or Discord-compatible) incoming webhook URL; "" for none.
    discord_webhook_url = models.TextField(blank=True, default="")
    discord_enabled = models.BooleanField(default=True)
    webpush_enabled = models.BooleanField(default=True)

    class Meta:
        verbose_name_plural = "notice settings"

    def __str__(self) -> str:
        return f"notice settings of user {self.owner_id}"


class PushSubscription(models.Model):
    """A browser's Web Push subscription (`PushSubscription.toJSON()`): where to POST, and the
    keys its payloads are encrypted for."""

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="push_subscriptions"
    )
    endpoint = models.TextField()
    p256dh = models.CharField(max_length=200)
    auth = models.CharField(max_length=100)
    created_at = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["owner", "endpoint"], name="push_one_per_endpoint"),
        ]

    def __str__(self) -> str:
        return f"push subscription #{self.pk} of user {self.owner_id}"


class Goal(models.Model):
    """Something a person asked Jarvis to work on over time (docs/design.md §25).

    Worked on in a sub-agent session of its own (`session_id`), one turn per check-in, by the
    task worker. `check_ins` counts the check-ins claimed so far: a check-in task carries the
    number it is for and runs only while the goal waits for exactly that number, which is
    what makes each check-in run once whichever worker, retry or recovery gets there.
    `checking_since` is set while a claimed check-in's turn runs.
    """

    ACTIVE = "active"
    PAUSED = "paused"
    DONE = "done"
    EXHAUSTED = "exhausted"
    FAILED = "failed"
    CANCELLED = "cancelled"
    STATUSES = [
        (ACTIVE, "active"),
        (PAUSED, "paused"),
        (DONE, "done"),
        (EXHAUSTED, "exhausted"),
        (FAILED, "failed"),
        (CANCELLED, "cancelled"),
    ]
    # Statuses that hold one of the person's MAX_ACTIVE_GOALS_PER_USER places.
    OPEN = (ACTIVE, PAUSED)

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="jarvis_goals"
    )
    text = models.TextField()
    status = models.CharField(max_length=16, choices=STATUSES, default=ACTIVE)
    result = models.TextField(blank=True, default="")
    # The conversation that receives the notes and the result; "" = the person's notices
    # conversation (chosen at each delivery, never a test session).
    report_to = models.CharField(max_length=200, blank=True, default="")
    # False for a goal set in a test session: its notices never leave the process.
    outbound = models.BooleanField(default=True)
    session_id = models.CharField(max_length=200, blank=True, default="")
    check_every_sec = models.PositiveIntegerField(default=3600)
    max_turns = models.PositiveIntegerField(default=10)
    turns_used = models.PositiveIntegerField(default=0)
    check_ins = models.PositiveIntegerField(default=0)
    checking_since = models.DateTimeField(null=True, blank=True)
    next_check_at = models.DateTimeField(null=True, blank=True)
    task_id = models.CharField(max_length=64, blank=True, default="")
    errors = models.PositiveIntegerField(default=0)  # failed check-ins in a row
    last_error = models.TextField(blank=True, default="")
    created_at = models.DateTimeField()
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [
            models.Index(fields=["owner", "status"], name="goal_owner_status"),
            models.Index(fields=["status", "next_check_at"], name="goal_due"),
        ]

    def __str__(self) -> str:
        return f"goal #{self.pk} ({self.status}): {self.text[:40]}"


class GoalNote(models.Model):
    """A progress note of a goal (`goal_update`); numbered per goal, each one notice."""

    goal = models.ForeignKey(Goal, on_delete=models.CASCADE, related_name="notes")
    number = models.PositiveIntegerField()
    text = models.TextField()
    created_at = models.DateTimeField()

    class Meta:
        ordering = ["goal", "number"]
        constraints = [
            models.UniqueConstraint(fields=["goal", "number"], name="goal_note_once"),
        ]

    def __str__(self) -> str:
        return f"goal #{self.goal_id} note {self.number}"
