"""Input and output shapes of accounts_app's API (docs/design.md §21); the output ones are
for the OpenAPI description: the answers are built by the services and settings sections."""

from rest_framework import serializers

from notices_app.web.serializers import MeOutput, MePatchInput


class MeWithRetentionOutput(MeOutput):
    retention_days = serializers.IntegerField(
        allow_null=True, help_text="the caller's own policy; null: the operator's"
    )
    retention_default_days = serializers.IntegerField(
        allow_null=True, help_text="RETENTION_DAYS; null: kept forever"
    )
    test_session_retention_days = serializers.IntegerField()


class MeWithRetentionPatchInput(MePatchInput):
    retention_days = serializers.IntegerField(required=False, allow_null=True, min_value=1)


class AccountDeleteInput(serializers.Serializer):
    # Not trimmed: the confirmation is the username exactly as typed, so " alice\n" (a paste
    # with a stray space or newline) deletes nothing.
    confirm = serializers.CharField(
        trim_whitespace=False,
        min_length=1,
        help_text="the account's username, typed by the person, exactly",
    )
