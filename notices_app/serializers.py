"""API shapes of notices_app. The rules (a run time in the future, a known unit) live in
notices_app.schedules, shared with the agent's `schedule` tool."""

from rest_framework import serializers

from notices_app.models import Schedule
from notices_app.schedules import MAX_REPEAT_EVERY, MAX_TEXT_CHARS, UNIT_SECONDS


class ScheduleListQuery(serializers.Serializer):
    state = serializers.ChoiceField(choices=["active", "all"], default="active")


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
