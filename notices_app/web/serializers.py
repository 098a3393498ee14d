"""API shapes of notices_app. The rules (a run time in the future, a known unit) live in
notices_app.services.schedules, shared with the agent's `schedule` tool."""

from django.conf import settings
from drf_spectacular.utils import extend_schema_serializer
from rest_framework import serializers

from notices_app.models import Goal, Schedule
from notices_app.services.goals import MAX_CHECK_EVERY_SEC as GOAL_MAX_CHECK_EVERY_SEC
from notices_app.services.goals import MAX_TEXT_CHARS as GOAL_MAX_TEXT_CHARS
from notices_app.services.goals import MAX_TURNS_LIMIT as GOAL_MAX_TURNS
from notices_app.services.goals import SETTABLE as GOAL_SETTABLE
from notices_app.services.schedules import (
    MAX_REPEAT_EVERY,
    MAX_TEXT_CHARS,
    SCHEDULE_OFFSET_MAX,
    SCHEDULE_PAGE_DEFAULT,
    SCHEDULE_PAGE_MAX,
    UNIT_SECONDS,
)


class ScheduleListQuery(serializers.Serializer):
    state = serializers.ChoiceField(choices=["active", "all"], default="active")
    limit = serializers.IntegerField(
        required=False, default=SCHEDULE_PAGE_DEFAULT, min_value=1, max_value=SCHEDULE_PAGE_MAX
    )
    offset = serializers.IntegerField(
        required=False, default=0, min_value=0, max_value=SCHEDULE_OFFSET_MAX
    )


class ScheduleCreateInput(serializers.Serializer):
    kind = serializers.ChoiceField(
        choices=[Schedule.REMINDER, Schedule.PROMPT], default=Schedule.REMINDER
    )
    text = serializers.CharField(max_length=MAX_TEXT_CHARS)
    run_at = serializers.DateTimeField(required=False, help_text="ISO 8601 with a time zone")
    in_seconds = serializers.FloatField(required=False, min_value=0)
    every = serializers.IntegerField(required=False, min_value=1, max_value=MAX_REPEAT_EVERY)
    unit = serializers.ChoiceField(choices=list(UNIT_SECONDS), required=False, default="")
    session_id = serializers.CharField(
        required=False, default="", allow_blank=True, max_length=200, trim_whitespace=False
    )


class ScheduleOutput(serializers.Serializer):
    id = serializers.IntegerField()
    kind = serializers.CharField()
    text = serializers.CharField()
    session_id = serializers.CharField(allow_null=True)
    first_run_at = serializers.DateTimeField()
    every = serializers.IntegerField(allow_null=True)
    unit = serializers.CharField(allow_null=True)
    next_run_at = serializers.DateTimeField(allow_null=True)
    state = serializers.ChoiceField(choices=["active", "done", "cancelled"])
    created_at = serializers.DateTimeField()
    cancelled_at = serializers.DateTimeField(allow_null=True)


# The list is a ViewSet's `list`, which drf-spectacular would document as an array; it
# answers one object, a page.
@extend_schema_serializer(many=False)
class ScheduleListOutput(serializers.Serializer):
    schedules = ScheduleOutput(many=True)
    next_offset = serializers.IntegerField(
        allow_null=True, help_text="the offset of the next page; null on the last one"
    )


# --- /api/me/ -----------------------------------------------------------------------------


class MeChannelsOutput(serializers.Serializer):
    webhook = serializers.BooleanField(help_text="the operator's NOTIFY_WEBHOOK_URL is set")
    webpush = serializers.BooleanField()
    discord = serializers.BooleanField()


class MePushSubscriptionOutput(serializers.Serializer):
    id = serializers.IntegerField()
    endpoint = serializers.CharField()
    created_at = serializers.DateTimeField()


class MeOutput(serializers.Serializer):
    username = serializers.CharField()
    discord_webhook_url = serializers.CharField(allow_blank=True)
    channels = MeChannelsOutput()
    push_subscriptions = MePushSubscriptionOutput(many=True)
    memory_in_context = serializers.BooleanField(
        help_text="profile facts and approved procedures go into the model's system prompt"
    )


class MeChannelsPatchInput(serializers.Serializer):
    """For the schema: the channels a PATCH may turn on or off (no others: a 400)."""

    webpush = serializers.BooleanField(required=False)
    discord = serializers.BooleanField(required=False)


class MePatchInput(serializers.Serializer):
    """For the schema: what a PATCH may send today (every field optional)."""

    discord_webhook_url = serializers.CharField(required=False, allow_blank=True)
    channels = MeChannelsPatchInput(required=False, help_text="{webpush, discord}")
    memory_in_context = serializers.BooleanField(required=False)


class PushKeysInput(serializers.Serializer):
    p256dh = serializers.CharField(min_length=1, max_length=200)
    auth = serializers.CharField(min_length=1, max_length=100)


class PushSubscriptionInput(serializers.Serializer):
    """The browser's `PushSubscription.toJSON()` (its `expirationTime` is ignored)."""

    # Not trimmed: checked as sent (jarvis_site.shared.outbound_urls refuses whitespace anywhere).
    endpoint = serializers.CharField(min_length=1, max_length=2000, trim_whitespace=False)
    keys = PushKeysInput()


class PushSubscriptionOutput(serializers.Serializer):
    id = serializers.IntegerField()


# --- goals (docs/design.md §25; the rules live in notices_app.services.goals) ---------------------------


class StringField(serializers.CharField):
    """A CharField that takes only strings: CharField would take 0 as "0", and the schema
    says string."""

    def to_internal_value(self, data):
        if not isinstance(data, str):
            raise serializers.ValidationError("Not a valid string.")
        return super().to_internal_value(data)


class GoalCreateInput(serializers.Serializer):
    text = StringField(min_length=1, max_length=GOAL_MAX_TEXT_CHARS)
    report_to = StringField(
        required=False,
        default="",
        allow_blank=True,
        max_length=200,
        trim_whitespace=False,
        help_text="one of your conversations; none: your notices conversation",
    )
    check_every_sec = serializers.IntegerField(
        required=False,
        min_value=settings.GOAL_MIN_CHECK_SEC,
        max_value=GOAL_MAX_CHECK_EVERY_SEC,
        help_text="seconds between check-ins; default 3600",
    )
    max_turns = serializers.IntegerField(
        required=False, min_value=1, max_value=GOAL_MAX_TURNS, help_text="default 10"
    )


class GoalStatusInput(serializers.Serializer):
    # PATCH: a body without it changes nothing.
    status = serializers.ChoiceField(choices=list(GOAL_SETTABLE), required=False)


class GoalOutput(serializers.Serializer):
    id = serializers.IntegerField()
    text = serializers.CharField()
    status = serializers.ChoiceField(choices=[value for value, _ in Goal.STATUSES])
    result = serializers.CharField(allow_null=True)
    report_to = serializers.CharField(allow_null=True)
    session_id = serializers.CharField()
    check_every_sec = serializers.IntegerField()
    max_turns = serializers.IntegerField()
    turns_used = serializers.IntegerField()
    next_check_at = serializers.DateTimeField(allow_null=True)
    errors = serializers.IntegerField()
    notes = serializers.ListField(child=serializers.CharField())
    created_at = serializers.DateTimeField()
    finished_at = serializers.DateTimeField(allow_null=True)


@extend_schema_serializer(many=False)
class GoalListOutput(serializers.Serializer):
    goals = GoalOutput(many=True)
